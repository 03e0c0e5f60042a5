"""A stand-in ``torchvision.models`` (torchvision is not installed, and has no plugtorch build) with
torchvision's ResNet-18 and -34: its BasicBlock layers, names, weight initialisation and the order of
its forward's calls, so that a traced graph and a state_dict read as torchvision's. Shared by the
example-script tests and the fx demos' tests."""
from __future__ import annotations

import types


def resnet_models(torch) -> types.ModuleType:
    """A stand-in ``torchvision.models`` with torchvision's ResNet-18 and -34 (its BasicBlock layers,
    names and weight initialisation); ``weights``/``pretrained`` must ask for no download."""
    nn = torch.nn

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):  # torchvision's order: a traced graph lists the calls as torch's
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            out += x if self.downsample is None else self.downsample(x)
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self, layers, num_classes=1000):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(64, layers[0])
            self.layer2 = self._make_layer(128, layers[1], stride=2)
            self.layer3 = self._make_layer(256, layers[2], stride=2)
            self.layer4 = self._make_layer(512, layers[3], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                           nn.BatchNorm2d(planes))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    def builder(layers):
        def build(*, weights=None, pretrained=False, progress=True, **kwargs):
            if weights is not None or pretrained:
                raise RuntimeError("the torchvision stand-in has no pretrained weights (nothing is downloaded)")
            return ResNet(layers, **kwargs)
        return build

    models = types.ModuleType("torchvision.models")
    models.resnet18 = builder([2, 2, 2, 2])  # type: ignore[attr-defined]
    models.resnet34 = builder([3, 4, 6, 3])  # type: ignore[attr-defined]
    return models
