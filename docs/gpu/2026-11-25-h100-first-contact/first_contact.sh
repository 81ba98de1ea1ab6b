#!/usr/bin/env bash
# First contact with a GPU, before gpu_check exists: environment, smoke train, bench, tests.
export PYTHONPATH=core PYTHONUNBUFFERED=1
{
date -u; nvidia-smi; python3 -c "import torch,timm,torchvision,sys;print(sys.version);print('torch',torch.__version__,'cuda',torch.version.cuda,'cudnn',torch.backends.cudnn.version(),'timm',timm.__version__,'tv',torchvision.__version__);print(torch.cuda.get_device_name(0))"
python3 -c "import papermill" 2>&1 | tail -1; python3 -c "import submitit" 2>&1 | tail -1
} > $OUT/env.txt 2>&1
echo "== smoke train"; ( time timeout 180 python3 -m quadnn_paper.execution.train --profile smoke --device cuda --out /tmp/first ) > $OUT/smoke.txt 2>&1; tail -5 $OUT/smoke.txt
echo "== bench"; timeout 240 python3 -m quadnn.bench --device cuda --models cifar_qresnet20 cifar_qresnet56 --implementations default naive lean fast speed --compile --steps 20 > $OUT/bench.txt 2>&1; tail -40 $OUT/bench.txt
echo "== pytest"; timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_layers.py tests/test_compile.py tests/test_recompute.py tests/test_bench.py -k "cuda or not cuda" > $OUT/pytest.txt 2>&1; tail -15 $OUT/pytest.txt
