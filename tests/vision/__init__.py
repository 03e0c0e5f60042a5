"""plugtorch.vision: torchvision-style datasets and transforms."""
