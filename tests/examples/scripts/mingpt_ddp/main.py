# Vendored from https://github.com/pytorch/examples/blob/77f55b9/distributed/minGPT-ddp/mingpt/main.py (commit 77f55b9),
# BSD 3-Clause License, Copyright (c) 2017, Pytorch contributors: see ../LICENSE.
# Changed only as a CPU user would (each line marked "# CPU:"): the CPU device for the accelerator's,
# no torch.accelerator.set_device_index, and no exit when fewer than 2 GPUs are found.
import os
import sys
import torch
from torch.utils.data import random_split
from torch.distributed import init_process_group, destroy_process_group
from model import GPT, GPTConfig, OptimizerConfig, create_optimizer
from trainer import Trainer, TrainerConfig
from char_dataset import CharDataset, DataConfig
from omegaconf import DictConfig
import hydra

def verify_min_gpu_count(min_gpus: int = 2) -> bool:
    has_gpu = torch.accelerator.is_available()
    gpu_count = torch.accelerator.device_count()
    return has_gpu and gpu_count >= min_gpus

def ddp_setup():
    device: torch.device = torch.device("cpu")  # CPU: was f"{acc}:{LOCAL_RANK}", acc the current accelerator
    backend = torch.distributed.get_default_backend_for_device(device)
    init_process_group(backend=backend)  # CPU: no torch.accelerator.set_device_index(LOCAL_RANK)

def get_train_objs(gpt_cfg: GPTConfig, opt_cfg: OptimizerConfig, data_cfg: DataConfig):
    dataset = CharDataset(data_cfg)
    train_len = int(len(dataset) * data_cfg.train_split)
    train_set, test_set = random_split(dataset, [train_len, len(dataset) - train_len])

    gpt_cfg.vocab_size = dataset.vocab_size
    gpt_cfg.block_size = dataset.block_size
    model = GPT(gpt_cfg)
    optimizer = create_optimizer(model, opt_cfg)
    
    return model, optimizer, train_set, test_set

@hydra.main(version_base=None, config_path=".", config_name="gpt2_train_cfg")
def main(cfg: DictConfig):
    ddp_setup()

    gpt_cfg = GPTConfig(**cfg['gpt_config'])
    opt_cfg = OptimizerConfig(**cfg['optimizer_config'])
    data_cfg = DataConfig(**cfg['data_config'])
    trainer_cfg = TrainerConfig(**cfg['trainer_config'])

    model, optimizer, train_data, test_data = get_train_objs(gpt_cfg, opt_cfg, data_cfg)
    trainer = Trainer(trainer_cfg, model, optimizer, train_data, test_data)
    trainer.train()

    destroy_process_group()

if __name__ == "__main__":
    # CPU: no verify_min_gpu_count(2) check, which exits when fewer than 2 GPUs are found
    main()
