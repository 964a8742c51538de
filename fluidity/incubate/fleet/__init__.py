"""Fluid 1.6's fleet API: `fleet.base.role_maker` (who this process is, from Paddle's
environment variables or arguments), `fleet.parameter_server.distribute_transpiler`
(`fleet` for parameter-server training, with sync / async / GEO-SGD strategies from
`distributed_strategy.StrategyFactory`) and `fleet.collective` (`fleet` for data-parallel
training whose gradients are all-reduced by ops in the program). `parameter_server.pslib`
imports but is not available (Baidu's closed pslib)."""
