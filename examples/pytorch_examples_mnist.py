"""A convolutional MNIST classifier written the way PyTorch's own examples write it.

The script is ordinary PyTorch code whose only change is ``import plugtorch as torch``
(and plugtorch's names in the other imports): the device is picked with
``torch.accelerator``, the data comes through ``plugtorch.vision`` (torchvision's
datasets and transforms) and a ``DataLoader``, the model is Conv2d/Dropout/Linear with
``log_softmax`` and ``nll_loss``, trained by Adadelta with a StepLR decay per epoch.

    python examples/pytorch_examples_mnist.py --epochs 1 --limit-train 6400
    python examples/pytorch_examples_mnist.py --data-dir ~/data --save-model

MNIST is read from DATA_DIR/mnist/ or DATA_DIR/MNIST/raw/ (default: $PLUGTORCH_DATA, else
data/; downloaded there when missing). ``--limit-train`` / ``--limit-test`` train and test
on the first N images, for a quick run on a CPU.
"""
import argparse
import os

import plugtorch as torch
import plugtorch.nn as nn
import plugtorch.nn.functional as F
import plugtorch.optim as optim
from plugtorch.optim.lr_scheduler import StepLR
from plugtorch.utils.data import DataLoader, Subset
from plugtorch.vision import datasets, transforms


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)  # 64 channels x 12 x 12 after two 3x3 convs and a 2x2 pool
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)} "
                  f"({100.0 * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.item():.6f}")
            if args.dry_run:
                break


def test(model, device, test_loader):
    """Average loss and accuracy over the test set."""
    model.eval()
    test_loss = 0.0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)  # the most likely class
            correct += pred.eq(target.view_as(pred)).sum().item()
    n = len(test_loader.dataset)
    test_loss /= n
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{n} "
          f"({100.0 * correct / n:.0f}%)\n")
    return test_loss, correct / n


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="plugtorch MNIST example (PyTorch style)")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                        help="input batch size for training (default: 64)")
    parser.add_argument("--test-batch-size", type=int, default=1000, metavar="N",
                        help="input batch size for testing (default: 1000)")
    parser.add_argument("--epochs", type=int, default=14, metavar="N",
                        help="number of epochs to train (default: 14)")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR",
                        help="learning rate (default: 1.0)")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M",
                        help="learning rate step gamma (default: 0.7)")
    parser.add_argument("--no-accel", action="store_true", help="disables the accelerator")
    parser.add_argument("--dry-run", action="store_true", help="quickly check a single pass")
    parser.add_argument("--seed", type=int, default=1, metavar="S", help="random seed (default: 1)")
    parser.add_argument("--log-interval", type=int, default=10, metavar="N",
                        help="how many batches to wait before logging training status")
    parser.add_argument("--save-model", action="store_true", help="save the trained model")
    parser.add_argument("--data-dir", default=os.environ.get("PLUGTORCH_DATA", "data"),
                        help="data root holding mnist/ (default: $PLUGTORCH_DATA, else data/)")
    parser.add_argument("--no-download", action="store_true",
                        help="fail instead of downloading missing MNIST files")
    parser.add_argument("--limit-train", type=int, default=None, metavar="N",
                        help="train on the first N training images only")
    parser.add_argument("--limit-test", type=int, default=None, metavar="N",
                        help="test on the first N test images only")
    return parser.parse_args(argv)


def main(argv=None):
    """Train and test; returns ``(test_loss, accuracy)`` after each epoch."""
    args = parse_args(argv)
    use_accel = not args.no_accel and torch.accelerator.is_available()

    torch.manual_seed(args.seed)

    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    train_kwargs = {"batch_size": args.batch_size}
    test_kwargs = {"batch_size": args.test_batch_size}
    if use_accel:
        accel_kwargs = {"num_workers": 1, "persistent_workers": True, "pin_memory": True,
                        "shuffle": True}
        train_kwargs.update(accel_kwargs)
        test_kwargs.update(accel_kwargs)

    transform = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize((0.1307,), (0.3081,)),
    ])
    dataset1 = datasets.MNIST(args.data_dir, train=True, download=not args.no_download,
                              transform=transform)
    dataset2 = datasets.MNIST(args.data_dir, train=False, transform=transform)
    if args.limit_train is not None:
        dataset1 = Subset(dataset1, range(min(args.limit_train, len(dataset1))))
    if args.limit_test is not None:
        dataset2 = Subset(dataset2, range(min(args.limit_test, len(dataset2))))
    train_loader = DataLoader(dataset1, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    history = []
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        history.append(test(model, device, test_loader))
        scheduler.step()

    if args.save_model:
        torch.save(model.state_dict(), "mnist_cnn.pt")
    return history


if __name__ == "__main__":
    main()
