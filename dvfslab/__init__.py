"""dvfslab: energy-efficient GPU DVFS for fine-tuning small language models on NVIDIA Jetson."""

__version__ = "0.1.0"
