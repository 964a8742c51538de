"""The environment of a parameter-server job's processes, whoever starts them (the local
launcher, the Ray one): Paddle's role variables and what the whole job shares."""
import os
import secrets


def job_environment(args, environ):
    """What every process of the job gets beyond Paddle's role variables: the RPC token
    (the caller's, else a fresh one) and the pservers' recovery directory."""
    env = {"PADDLE_TRAINERS_NUM": str(args.worker_num)}
    if not (environ.get("FLUIDITY_RPC_TOKEN") or environ.get("FLAGS_rpc_token")):
        env["FLUIDITY_RPC_TOKEN"] = secrets.token_hex(16)
    if args.checkpoint_dir:
        env["FLAGS_pserver_checkpoint_dir"] = os.path.abspath(args.checkpoint_dir)
    return env


def role_environment(role, idx, eps):
    """Paddle's variables for process `idx` of `role` ("PSERVER" / "TRAINER")."""
    env = {"PADDLE_PSERVERS_IP_PORT_LIST": ",".join(eps), "TRAINING_ROLE": role}
    if role == "PSERVER":
        ip, port = eps[idx].rsplit(":", 1)
        env.update(POD_IP=ip, PADDLE_PORT=port, PADDLE_CURRENT_ENDPOINT=eps[idx],
                   PADDLE_TRAINER_ID="0")
    else:
        env.update(PADDLE_TRAINER_ID=str(idx), POD_IP="127.0.0.1")
    return env
