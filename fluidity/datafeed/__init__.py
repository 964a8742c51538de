"""The data side of AsyncExecutor: DataFeedDesc configs, the MultiSlot reader and a
synthetic CTR data generator (fluidity.datafeed.generate)."""
from .data_feed_desc import DataFeedDesc
from .errors import DataError, DataWarning
from .multislot import MultiSlotReader

__all__ = ["DataFeedDesc", "DataError", "DataWarning", "MultiSlotReader"]
