"""Fluid 1.8's `FleetUtil`: the helpers CTR training scripts call around a fleet: rank-0
logging, global AUC and CTR metrics summed over the workers, the online pass schedule, and
the pruned-program checks of `utils` (text/binary conversion, drawing, comparing the pruned
program with the training one, a trial run of the saved model).

`FleetUtil(mode)` picks the fleet it works over: "pslib" (Fluid's default; pslib is not
part of Fluidity, so the calls that need a fleet raise ImportError naming the fleets that
work) or "transpiler" (the parameter-server fleet). The methods that save and load pslib's
sparse tables and write its donefiles on HDFS need pslib itself and raise ImportError in
both modes.
"""
import logging
import math
import os
import re
import sys

import numpy as np

from ..parameter_server.distribute_transpiler import fleet as fleet_transpiler
from ..parameter_server.pslib import fleet as fleet_pslib
from ..parameter_server.pslib.fleet_wrapper import _INSTEAD
from . import utils
from .hdfs import HDFSClient  # noqa: F401  (Fluid's fleet_util re-exports it)

__all__ = ["FleetUtil"]

_logger = logging.getLogger("fluidity.fleet_util")

FLEETS = {"pslib": fleet_pslib, "transpiler": fleet_transpiler}

# FleetUtil methods that are pslib's table and donefile management
PSLIB_ONLY = ("load_fleet_model_one_table", "load_fleet_model", "save_fleet_model",
              "write_model_donefile", "write_xbox_donefile", "write_cache_donefile",
              "load_model", "save_model", "save_batch_model", "save_delta_model",
              "save_xbox_base_model", "save_cache_model", "save_cache_base_model",
              "pull_all_dense_params", "save_paddle_inference_model", "save_paddle_params",
              "get_last_save_xbox_base", "get_last_save_xbox", "get_last_save_model")

METRIC_NAMES = ("auc", "bucket_error", "mae", "rmse", "actual_ctr", "predicted_ctr", "copc",
                "mean_predict_qvalue", "total_ins_num")

_BRACES = re.compile(r"^\{(-?\d+)\.\.(-?\d+)\}$")


def _global_scope():
    from ....core.scope import global_scope
    return global_scope()


def _row0(stat):
    """The auc op's bucket counts: row 0 of a [1, num_thresholds + 1] statistic (as Fluid
    reads them), or the whole of a flat one."""
    return stat[0] if stat.ndim == 2 else stat.reshape(-1)


def _expand(spec):
    """A shell-style list: "{0..23}" (zero-padded as its ends are), "a b c" or a list;
    expanded here, never by a shell."""
    if isinstance(spec, (list, tuple)):
        return [str(s) for s in spec]
    out = []
    for word in str(spec).split():
        m = _BRACES.match(word)
        if not m:
            out.append(word)
            continue
        a, b = m.group(1), m.group(2)
        width = max(len(a), len(b)) if (a.startswith("0") and len(a) > 1) or \
            (b.startswith("0") and len(b) > 1) else 0
        step = 1 if int(b) >= int(a) else -1
        out += [str(i).zfill(width) for i in range(int(a), int(b) + step, step)]
    return out


def bucket_auc(pos, neg):
    """The ROC AUC of the auc op's positive and negative bucket counts (bucket i holds the
    examples predicted in [i/n, (i+1)/n)); 0.5 when one class is absent."""
    pos, neg = np.asarray(pos, np.float64).reshape(-1), np.asarray(neg, np.float64).reshape(-1)
    p, n = pos[::-1].cumsum(), neg[::-1].cumsum()
    prev_p, prev_n = np.concatenate([[0.0], p[:-1]]), np.concatenate([[0.0], n[:-1]])
    area = float(np.sum((n - prev_n) * (prev_p + p) / 2))
    tp, tn = float(p[-1]) if len(p) else 0.0, float(n[-1]) if len(n) else 0.0
    return 0.5 if tp * tn == 0 else area / (tp * tn)


def bucket_error(pos, neg):
    """Fluid's bucket error: the impression-weighted relative error of the actual CTR
    against the bucket's predicted CTR, over runs of buckets pooled until their estimate
    is tight enough (relative error under 5%, spans of at most 0.01)."""
    pos, neg = np.asarray(pos, np.float64).reshape(-1), np.asarray(neg, np.float64).reshape(-1)
    num_bucket = len(pos)
    last_ctr, impressions, ctr_sum, click_sum = -1.0, 0.0, 0.0, 0.0
    error_sum = error_count = 0.0
    for i in range(num_bucket):
        click, show, ctr = pos[i], pos[i] + neg[i], i / num_bucket
        if abs(ctr - last_ctr) > 0.01:
            last_ctr, impressions, ctr_sum, click_sum = ctr, 0.0, 0.0, 0.0
        impressions += show
        ctr_sum += ctr * show
        click_sum += click
        if impressions == 0:
            continue
        adjust_ctr = ctr_sum / impressions
        if adjust_ctr == 0:
            continue
        if math.sqrt((1 - adjust_ctr) / (adjust_ctr * impressions)) < 0.05:
            error_sum += abs(click_sum / impressions / adjust_ctr - 1) * impressions
            error_count += impressions
            last_ctr = -1
    return error_sum / error_count if error_count > 0 else 0.0


class FleetUtil:
    """Helpers over the fleet of `mode` ("pslib" or "transpiler")."""

    def __init__(self, mode="pslib"):
        if mode not in FLEETS:
            raise ValueError('Please choose one mode from ["pslib", "transpiler"]')
        self.mode = mode
        self._fleet = FLEETS[mode]

    # -- logging on the first worker only --------------------------------------------------
    def rank0_print(self, s):
        if self._fleet.worker_index() != 0:
            return
        print(s)
        sys.stdout.flush()

    def rank0_info(self, s):
        if self._fleet.worker_index() == 0:
            _logger.info(s)

    def rank0_error(self, s):
        if self._fleet.worker_index() == 0:
            _logger.error(s)

    # -- variables and metrics -------------------------------------------------------------
    def set_zero(self, var_name, scope=None, place=None, param_type="int64"):
        """Zero the tensor of `var_name` in `scope`, keeping its shape, as `param_type`."""
        scope = _global_scope() if scope is None else scope
        var = scope.find_var(var_name)
        if var is None:
            raise ValueError(f"set_zero: variable '{var_name}' is not in the scope")
        tensor = var.get_tensor()
        tensor.set(np.zeros(np.array(tensor).shape, dtype=param_type), place)

    def _global_sum(self, scope, name):
        """`name`'s value summed over the workers (the fleet's all-reduce), as float64."""
        local = np.array(scope.find_var(name).get_tensor(), dtype=np.float64)
        out = np.zeros(local.size, np.float64)
        self._fleet.all_reduce_worker(local.reshape(-1), out)
        return out.reshape(local.shape)

    def get_global_auc(self, scope=None, stat_pos="_generated_var_2",
                       stat_neg="_generated_var_3"):
        """The AUC over every worker's auc buckets (`fluid.layers.auc`'s stat_pos and
        stat_neg variables); None when they are not in the scope."""
        scope = _global_scope() if scope is None else scope
        if scope.find_var(stat_pos) is None or scope.find_var(stat_neg) is None:
            self.rank0_print("not found auc bucket")
            return None
        self._fleet.barrier_worker()
        pos, neg = self._global_sum(scope, stat_pos), self._global_sum(scope, stat_neg)
        auc = bucket_auc(_row0(pos), _row0(neg))
        self._fleet.barrier_worker()
        return auc

    def print_global_auc(self, scope=None, stat_pos="_generated_var_2",
                         stat_neg="_generated_var_3", print_prefix=""):
        self.rank0_print(print_prefix + " global auc = %s"
                         % self.get_global_auc(scope, stat_pos, stat_neg))

    def _missing(self, scope, names):
        for label, name in names:
            if scope.find_var(name) is None:
                self.rank0_print("not found auc bucket" if label is None
                                 else f"not found {label}={name}")
                return True
        return False

    def get_global_metrics(self, scope=None, stat_pos_name="_generated_var_2",
                           stat_neg_name="_generated_var_3", sqrerr_name="sqrerr",
                           abserr_name="abserr", prob_name="prob", q_name="q",
                           pos_ins_num_name="pos", total_ins_num_name="total"):
        """[auc, bucket_error, mae, rmse, actual_ctr, predicted_ctr, copc,
        mean_predict_qvalue, total_ins_num] over every worker (the auc buckets and
        `contrib.layers.ctr_metric_bundle`'s variables); nine Nones when one is missing."""
        scope = _global_scope() if scope is None else scope
        names = [(None, stat_pos_name), (None, stat_neg_name), ("sqrerr_name", sqrerr_name),
                 ("abserr_name", abserr_name), ("prob_name", prob_name), ("q_name", q_name),
                 ("pos_ins_num_name", pos_ins_num_name),
                 ("total_ins_num_name", total_ins_num_name)]
        if self._missing(scope, names):
            return [None] * len(METRIC_NAMES)
        self._fleet.barrier_worker()
        auc = self.get_global_auc(scope, stat_pos_name, stat_neg_name)
        pos = _row0(self._global_sum(scope, stat_pos_name))
        neg = _row0(self._global_sum(scope, stat_neg_name))

        def first(name):
            return float(self._global_sum(scope, name).reshape(-1)[0])
        sqrerr, abserr, prob, q = (first(n) for n in (sqrerr_name, abserr_name, prob_name,
                                                      q_name))
        pos_ins, total = first(pos_ins_num_name), first(total_ins_num_name)
        if total == 0:
            raise ValueError(f"get_global_metrics: '{total_ins_num_name}' is 0 on every "
                             f"worker: no instance was counted")
        actual_ctr, predicted_ctr = pos_ins / total, prob / total
        copc = actual_ctr / predicted_ctr if abs(predicted_ctr) > 1e-6 else 0.0
        return [auc, bucket_error(pos, neg), abserr / total, math.sqrt(sqrerr / total),
                actual_ctr, predicted_ctr, copc, q / total, int(total)]

    def print_global_metrics(self, scope=None, stat_pos_name="_generated_var_2",
                             stat_neg_name="_generated_var_3", sqrerr_name="sqrerr",
                             abserr_name="abserr", prob_name="prob", q_name="q",
                             pos_ins_num_name="pos", total_ins_num_name="total",
                             print_prefix=""):
        m = self.get_global_metrics(scope, stat_pos_name, stat_neg_name, sqrerr_name,
                                    abserr_name, prob_name, q_name, pos_ins_num_name,
                                    total_ins_num_name)
        if m[0] is None:
            return
        self.rank0_print("%s global AUC=%.6f BUCKET_ERROR=%.6f MAE=%.6f RMSE=%.6f "
                         "Actural_CTR=%.6f Predicted_CTR=%.6f COPC=%.6f MEAN Q_VALUE=%.6f "
                         "Ins number=%s" % (print_prefix, *m))

    # -- the online schedule ---------------------------------------------------------------
    def get_online_pass_interval(self, days, hours, split_interval, split_per_pass,
                                 is_data_hourly_placed):
        """The splits of each pass of a day: the day cut every `split_interval` minutes
        ("HHMM", or "HH" when the data is placed hourly) within the hours `hours`
        ("{0..23}"), `split_per_pass` splits a pass."""
        hours = _expand(hours)
        split_interval, split_per_pass = int(split_interval), int(split_per_pass)
        if split_interval <= 0 or split_per_pass <= 0 or 24 * 60 % split_interval:
            raise ValueError(f"get_online_pass_interval: split_interval {split_interval} "
                             f"must divide a day's 1440 minutes and split_per_pass "
                             f"{split_per_pass} be positive")
        if not hours:
            raise ValueError("get_online_pass_interval: hours is empty")
        first, last = int(hours[0]), int(hours[-1])
        splits = []
        for start in range(0, 24 * 60, split_interval):
            h, m = divmod(start, 60)
            if first <= h <= last:
                splits.append("%02d" % h if is_data_hourly_placed else "%02d%02d" % (h, m))
        passes = 24 * 60 // split_interval // split_per_pass
        return [splits[i * split_per_pass:(i + 1) * split_per_pass] for i in range(passes)
                if splits[i * split_per_pass:(i + 1) * split_per_pass]]

    # -- programs --------------------------------------------------------------------------
    def program_type_trans(self, prog_dir, prog_fn, is_text):
        return utils.program_type_trans(prog_dir, prog_fn, is_text)

    def draw_from_program_file(self, model_filename, is_text, output_dir, output_filename):
        program = utils.load_program(model_filename, is_text)
        utils.graphviz(program.global_block(), output_dir, output_filename)

    def draw_from_program(self, program, output_dir, output_name):
        utils.graphviz(program.global_block(), output_dir, output_name)

    def check_two_programs(self, config):
        """True when the pruned program's persistables match the training program's
        (config: train_prog_path, is_text_train_program, pruned_prog_path,
        is_text_pruned_program, draw, draw_out_name)."""
        train = utils.load_program(config.train_prog_path, config.is_text_train_program)
        pruned = utils.load_program(config.pruned_prog_path, config.is_text_pruned_program)
        if config.draw:
            self.draw_from_program(pruned, os.path.dirname(config.pruned_prog_path),
                                   config.draw_out_name)
        res = utils.check_pruned_program_vars(train, pruned)
        _logger.info("check_programs succeed." if res else
                     "check_programs failed. pruned program and train program not match!")
        return res

    def check_vars_and_dump(self, config):
        """Run the saved pruned model once (utils.check_saved_vars_try_dump); the fetched
        values."""
        _logger.info("start check_vars_and_dump.")
        results = utils.check_saved_vars_try_dump(
            config.dump_model_dir, config.dump_program_filename, config.is_text_dump_program,
            config.feed_config, config.fetch_config, config.batch_size,
            config.save_params_filename)
        _logger.info("check_vars_and_dump succeed.")
        return results

    def parse_program_proto(self, prog_path, is_text, output_dir):
        """Write output_dir/vars_all.log, vars_persistable.log and ops.log for the program
        file `prog_path`."""
        utils.parse_program(utils.load_program(prog_path, is_text), output_dir)


def _pslib_only(name):
    def method(self, *args, **kwargs):
        raise ImportError(f"FleetUtil.{name}: saves and loads pslib's tables; {_INSTEAD}")
    method.__name__ = name
    method.__doc__ = "pslib's; raises ImportError here."
    return method


for _name in PSLIB_ONLY:
    setattr(FleetUtil, _name, _pslib_only(_name))
