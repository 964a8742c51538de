"""Which of Paddle 1.8's test files the conformance run counts, and why not the others.

A file is out of scope when it tests something Fluidity does not set out to be (dygraph, the
Paddle 2.0 API that 1.8's tree already carries, CUDA-only kernels, C++ internals such as graph
passes and allocators, other hardware back ends); every other file is in scope, passing or
failing. The rules read the file's name and text only, so the split does not depend on how
Fluidity fares; a file whose every test is skipped when run (CUDA-only classes) is reported as
such by the runner, not counted as a pass.
"""
import re

# Test files that Paddle 1.8's own CI does not run on a Linux CPU build, read from
# python/paddle/fluid/tests/unittests/CMakeLists.txt at the branch point: removed from the test
# list and added back only under WITH_GPU / WITH_DGC (which needs a GPU), or removed
# ("FIXME", "not need") and never added back. Some of them cannot pass anywhere (the basic
# GRU/LSTM API tests call np.set_seed, which no numpy has).
NOT_RUN_BY_PADDLE_ON_CPU = {
    "GPU build only": (
        "test_c_comm_init_all_op", "test_allgather", "test_allreduce", "test_broadcast",
        "test_reducescatter", "test_reducescatter_api", "test_conv2d_fusion_op",
        "test_rank_attention_op", "test_batch_fc_op", "test_parallel_dygraph_mnist",
        "test_pipeline", "test_boxps", "test_paddlebox_datafeed",
        "test_build_strategy_fusion_group_pass", "test_fleet_checkpoint", "test_launch",
        "test_dgc_op", "test_dgc_momentum_op", "test_dgc_optimizer",
        "test_dist_mnist_dgc_nccl", "test_dist_se_resnext_dgc"),
    "disabled in Paddle's CI": (
        "test_seq_concat_op", "test_lstm_unit_op", "test_cond_op",
        "test_async_ssa_graph_executor_mnist", "test_basic_gru_api", "test_basic_gru_unit_op",
        "test_basic_lstm_api", "test_basic_lstm_unit_op",
        "test_imperative_data_loader_exception", "test_dist_transformer",
        "test_dist_transpiler", "test_dist_base", "test_dist_fleet_base"),
}
_NOT_RUN = {f"{n}.py": why for why, names in NOT_RUN_BY_PADDLE_ON_CPU.items() for n in names}

# Test files whose subject is a real dataset's download or contents (its URL, md5, the size of
# its dictionary): nothing can be downloaded here, and the shim's `paddle.dataset` is
# synthetic data of the same shapes, which serves every test that trains on a dataset but
# not one that checks the corpus itself.
NEEDS_THE_NETWORK = ("test_dataset_download", "test_dataset_sentiment")

# (category, why, test on (name, text)) in order: the first that matches decides
RULES = (
    ("needs the network", "downloads a real dataset or checks its contents (URL, md5, "
     "dictionary size); nothing can be downloaded here",
     lambda name, text: name[:-3] in NEEDS_THE_NETWORK),
    ("not run by Paddle on a CPU", lambda name: "Paddle 1.8's own CI does not run it on a "
     f"Linux CPU build ({_NOT_RUN[name]}, unittests/CMakeLists.txt)",
     lambda name, text: name in _NOT_RUN),
    ("dygraph", "dygraph (imperative) mode, which Fluidity does not build",
     lambda name, text: name.startswith(("test_imperative", "test_dygraph"))
     or "dygraph_to_static" in text or re.search(
         r"fluid\.dygraph\.guard|dygraph\.guard\(|with guard\(|enable_dygraph|"
         r"enable_imperative|disable_static|to_variable\(|dygraph\.Layer|"
         r"from paddle\.fluid\.dygraph|import paddle\.fluid\.dygraph", text) is not None),
    ("paddle 2.0 API", "the Paddle 2.0 API (paddle.nn / paddle.tensor / paddle.static ...), "
     "not Fluid 1.x",
     lambda name, text: re.search(
         r"\bpaddle\.(nn|tensor|io|static|framework|imperative|metric|distribution|"
         r"device|jit|hapi|incubate\.hapi|utils|vision|text)\b|"
         r"\bpaddle\.(to_tensor|to_variable|manual_seed|enable_static|disable_static|"
         r"add|matmul|ones|zeros|full|arange|linspace|concat|stack|sum|mean|max|min|"
         r"elementwise_sum|randn|rand|randint|randperm|index_select|nonzero|sort|argmax|"
         r"argmin|roll|flip|tril|triu|cross|dot|dist|norm|kron|addmm|bmm|cholesky|"
         r"inverse|log1p|logsumexp|std|var|allclose|equal_all|trace|meshgrid|"
         r"cumsum|clamp|addcmul|where|unique|numel|diag|eye|empty|histogram|"
         r"shape|t|transpose|reshape|squeeze|unsqueeze|split|chunk|gather|scatter|"
         r"expand|tile|flatten|cast|erf|abs|exp|log|sqrt|sign|floor|ceil|round|"
         r"sin|cos|tanh|pow|square|maximum|minimum|multiply|divide|subtract|"
         r"floor_divide|remainder|mod|prod|isfinite|isinf|isnan|all|any|masked_select|"
         r"strided_slice|slice|crop|pad|zeros_like|ones_like|full_like|"
         r"create_parameter|create_global_var|ParamAttr|CPUPlace|CUDAPlace|Program|"
         r"program_guard|Executor|set_default_dtype|get_default_dtype|grad|"
         r"SaveLoadConfig|save|load|no_grad|in_dynamic_mode)\(", text) is not None
     # any other function called at the top of `paddle`: Fluid 1.x's only one is paddle.batch
     or re.search(r"(?<![\w.])paddle\.(?!batch\b)[a-z_0-9]+\(", text) is not None),
    ("C++ internal", "C++ internals (IR graph passes, allocators, MKL-DNN/nGraph/TensorRT/"
     "Lite/XPU back ends, C++ operator unit tests)",
     lambda name, text: re.search(
         r"_pass(_|\.py)|fuse_all_reduce|mkldnn|ngraph|tensorrt|_lite|_xpu|allocator|"
         r"test_cpp|memory_usage|test_global_var_getter|test_fleet_rolemaker|"
         r"_mkldnn|inference_api|test_ir_|test_auto_growth|"
         r"test_gpu_|cudnn|nccl|test_naive_best_fit|test_cuda_|_fp16|"
         r"test_flags_use|test_set_bool_attr|test_communicator_geo|"
         r"test_pipeline|test_boxps|test_dist_fleet_ps|test_dgc", name) is not None
     or re.search(r"IrGraph|core\.get_pass|core\.ir\b|_apply_pass|PassBuilder|"
                  r"create_pass_builder|build_strategy\._finalize_strategy", text) is not None),
)


def classify(name, text):
    """(category, why) of an out-of-scope file, or None for one the run counts."""
    for category, why, test in RULES:
        if test(name, text):
            return category, why(name) if callable(why) else why
    return None
