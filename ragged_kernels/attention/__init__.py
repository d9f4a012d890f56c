from ragged_kernels.attention.interface import ragged_attention, set_debug

__all__ = ["ragged_attention", "set_debug"]
