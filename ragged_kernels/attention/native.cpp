// Native entry point of ragged_attention: the default launch path where CUDA is available
// (RAGGED_KERNELS_LAUNCH=python turns it off; ragged_kernels/attention/native.py).
//
// Why: host cost per call is a product target (<= 0.33x FlashAttention-2 varlen; docs/performance.md
// "Kernel targets"). The
// Python path spends ~14 us per call on the H200 VM: argument checks, the output allocation, the
// cache lookup and Triton's CompiledKernel.run (which alone is ~5.6 us). Here one C++ call checks the
// arguments, allocates the output and calls cuLaunchKernel with the CUfunction that Triton compiled
// and the Python side registered.
//
// Contract with ragged_kernels/attention/native.py: `attention(...)` returns None for anything it
// does not handle (a cache miss, a CPU tensor, an unusual argument, a launch error); the caller then
// runs the Python path, which validates with its clear errors, compiles, and registers the kernel.
// libcuda is opened at first use (dlopen), so the module also loads on machines without a driver.

#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAFunctions.h>

#include <dlfcn.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <map>

namespace {

using CUresultInt = int;
using LaunchFn = CUresultInt (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 void*, void**, void**);

constexpr double kLog2e = 1.4426950408889634;
// fwd.py's WIDE_PAIRS: from this many (image, head) pairs, capacities <= 256 use the table's bucket 2.
constexpr int64_t kWidePairs = 256;
constexpr int kMaxExtra = 8;

struct Entry {
  void* function;  // CUfunction
  unsigned block_threads;
  unsigned shared_bytes;
  int n_extra;  // trailing 64-bit parameters Triton adds (scratch pointers), passed as NULL
  int64_t block_m;
};

// (dtype code, heads, head_dim, q/k/v strides (t, h), max_seqlen bucket, device) -> kernel
using Key = std::array<int64_t, 11>;
std::map<Key, Entry> g_table;
LaunchFn g_launch = nullptr;

int dtype_code(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return 0;
    case at::kBFloat16: return 1;
    case at::kFloat: return 2;
    default: return -1;
  }
}

bool load_driver() {
  if (g_launch != nullptr) return true;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) return false;
  g_launch = reinterpret_cast<LaunchFn>(dlsym(lib, "cuLaunchKernel"));
  return g_launch != nullptr;
}

bool aligned16(const at::Tensor& t) { return (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15) == 0; }

}  // namespace

// Register the kernel Triton compiled for one key (called by native.py after a compile).
bool register_kernel(int64_t dtype, int64_t heads, int64_t head_dim, int64_t sq0, int64_t sq1, int64_t sk0,
                     int64_t sk1, int64_t sv0, int64_t sv1, int64_t bucket, int64_t device, uint64_t function,
                     int64_t block_threads, int64_t shared_bytes, int64_t n_extra, int64_t block_m) {
  if (!load_driver() || n_extra < 0 || n_extra > kMaxExtra || block_m <= 0) return false;
  Key key{dtype, heads, head_dim, sq0, sq1, sk0, sk1, sv0, sv1, bucket, device};
  g_table[key] = Entry{reinterpret_cast<void*>(function), static_cast<unsigned>(block_threads),
                       static_cast<unsigned>(shared_bytes), static_cast<int>(n_extra), block_m};
  return true;
}

int64_t registered() { return static_cast<int64_t>(g_table.size()); }

// ragged_attention(q, k, v, cu_seqlens, max_seqlen) with the default scale and a fresh output.
py::object attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& cu,
                     int64_t max_seqlen) {
  if (g_launch == nullptr || !q.defined() || !k.defined() || !v.defined() || !cu.defined()) return py::none();
  if (!q.is_cuda() || q.dim() != 3 || max_seqlen < 0) return py::none();
  const int dt = dtype_code(q.scalar_type());
  if (dt < 0 || k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) return py::none();
  if (!k.sizes().equals(q.sizes()) || !v.sizes().equals(q.sizes())) return py::none();
  const int64_t total = q.size(0), heads = q.size(1), head_dim = q.size(2);
  if (head_dim != 32 && head_dim != 64 && head_dim != 128) return py::none();
  if (q.stride(2) != 1 || k.stride(2) != 1 || v.stride(2) != 1) return py::none();
  if (cu.scalar_type() != at::kInt || cu.dim() != 1 || cu.size(0) < 1 || !cu.is_contiguous()) return py::none();
  const int64_t dev = q.get_device();
  if (k.get_device() != dev || v.get_device() != dev || cu.get_device() != dev) return py::none();
  if (dev != static_cast<int64_t>(c10::cuda::current_device())) return py::none();  // multi-GPU: Python path
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(cu)) return py::none();
  if (total > INT32_MAX) return py::none();
  const int64_t pairs = (cu.size(0) - 1) * heads;
  const int64_t bucket = max_seqlen > 256 ? 1 : (pairs >= kWidePairs ? 2 : 0);  // fwd.py's config_bucket
  Key key{dt, heads, head_dim, q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
          bucket, dev};
  auto it = g_table.find(key);
  if (it == g_table.end()) return py::none();
  const Entry& e = it->second;

  at::Tensor out = at::empty({total, heads, head_dim}, q.options());
  const int64_t batch = cu.size(0) - 1;
  const int64_t grid_m = (max_seqlen + e.block_m - 1) / e.block_m;
  if (grid_m == 0 || batch <= 0 || total == 0) return py::cast(out);
  if (grid_m > INT32_MAX) return py::none();
  if (!aligned16(out) || batch * heads > 65535) return py::none();

  uint64_t p_q = reinterpret_cast<uint64_t>(q.data_ptr()), p_k = reinterpret_cast<uint64_t>(k.data_ptr());
  uint64_t p_v = reinterpret_cast<uint64_t>(v.data_ptr()), p_o = reinterpret_cast<uint64_t>(out.data_ptr());
  uint64_t p_cu = reinterpret_cast<uint64_t>(cu.data_ptr());
  int32_t n_tokens = static_cast<int32_t>(total);
  // As the Python path computes it (default_scale(d) * LOG2E in double, then fp32): the same bits.
  float scale_log2 = static_cast<float>((1.0 / std::sqrt(static_cast<double>(head_dim))) * kLog2e);
  uint64_t null_ptr = 0;
  void* params[7 + kMaxExtra] = {&p_q, &p_k, &p_v, &p_o, &p_cu, &n_tokens, &scale_log2};
  for (int i = 0; i < e.n_extra; ++i) params[7 + i] = &null_ptr;
  void* stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev)).stream();
  const CUresultInt rc = g_launch(e.function, static_cast<unsigned>(grid_m), static_cast<unsigned>(batch * heads), 1,
                                  e.block_threads, 1, 1, e.shared_bytes, stream, params, nullptr);
  if (rc != 0) return py::none();
  return py::cast(out);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("attention", &attention, "ragged_attention fast path (None: use the Python path)");
  m.def("register_kernel", &register_kernel, "register a compiled Triton kernel for one key");
  m.def("registered", &registered, "number of registered kernels");
}
