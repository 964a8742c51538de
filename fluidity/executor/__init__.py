from .executor import Executor, _as_lodtensor, add_feed_fetch_ops, as_numpy  # noqa: F401
from .fetch_handler import FetchHandler
from .plan import Plan, RunEnv
from .strategy import ExecutionStrategy
from .scope_access import (_fetch_var, _switch_scope, _to_name_str, global_scope,  # noqa: F401
                           scope_guard)
