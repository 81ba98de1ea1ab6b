"""Model zoo; importing a module registers its models in timm's registry.

Add one import line per model file.
"""
from . import cifar_resnet
from . import cifar_vgg
from . import imagenet_resnet
