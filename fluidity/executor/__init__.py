from .executor import Executor, _as_lodtensor, add_feed_fetch_ops, as_numpy  # noqa: F401
from .fetch_handler import FetchHandler
from .plan import Plan, RunEnv
from .strategy import ExecutionStrategy
