"""A stand-in for boto3 on the minGPT-ddp test's PYTHONPATH (tests/distributed/test_mingpt_ddp.py).

The vendored trainer imports boto3 at the top but uses it only to upload a snapshot to an
``s3://`` path, which the test never gives; the stand-in lets the import succeed without
adding the AWS SDK to the dev dependencies, and fails loudly if the trainer ever reaches it.
"""


def client(*args, **kwargs):
    raise RuntimeError("boto3.client: the minGPT-ddp test runs with a boto3 stand-in that cannot reach S3; "
                       "give trainer_config.snapshot_path a local path, or install boto3")
