"""The ``plugtorch`` command: an application written on the library, not part of it.

``cli`` parses the command line (``plugtorch train``, ``plugtorch viz``, ``plugtorch plugins``);
``train`` is the training job (its models, optimizers and loop), with ``train_data`` (the
images normalised once) and ``train_outputs`` (CSV, plot, TensorBoard, safetensors);
``viz`` draws an autograd graph. ``import plugtorch`` imports none of them: the library does
not pay for the application.
"""
