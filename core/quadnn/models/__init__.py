"""Model zoo; importing a module registers its models in timm's registry.

Add one import line per model file.
"""

from . import cifar_resnet, cifar_vgg, imagenet_resnet

# Bumped whenever a registered model computes something else for the same arguments (other
# parameters, another initialisation). Result caches keyed by a model's name and arguments (the
# paper companion's runs) include it, so results of older models are never reused.
# 2: quadratic convolutions carry b_r and c, Kaiming fan_in init, zero_init_last (timm's default).
VERSION = 2
