"""Fluid 1.8's `fleet.utils`: FleetUtil (fleet_util), the pruned-program checks (utils), the
HDFS client (hdfs) and the trainers' HDFS barrier (fleet_barrier_util)."""
