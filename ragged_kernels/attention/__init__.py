from ragged_kernels.attention.interface import forced_launch_path, launch_path, ragged_attention, set_debug

__all__ = ["forced_launch_path", "launch_path", "ragged_attention", "set_debug"]
