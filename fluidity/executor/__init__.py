from .executor import Executor, add_feed_fetch_ops
from .fetch_handler import FetchHandler
from .plan import Plan, RunEnv
from .strategy import ExecutionStrategy
