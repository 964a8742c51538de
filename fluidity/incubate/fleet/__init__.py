"""Fluid 1.6's fleet API for parameter-server training: `fleet.base.role_maker` (who this
process is, from Paddle's environment variables) and
`fleet.parameter_server.distribute_transpiler` (`fleet`, with sync / async / GEO-SGD
strategies from `distributed_strategy.StrategyFactory`)."""
