"""A stand-in for the Hadoop client's `hadoop fs` over a local directory ($FAKE_HDFS_ROOT), for
the HDFSClient tests: the commands Fluid's client runs, with `hadoop fs -ls`'s 8-field lines."""
import os
import shutil
import sys
import time

ROOT = os.environ["FAKE_HDFS_ROOT"]


def local(path):
    return os.path.join(ROOT, path.lstrip("/"))


def line(path):
    full = local(path)
    kind = "d" if os.path.isdir(full) else "-"
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(full)))
    size = 0 if kind == "d" else os.path.getsize(full)
    return f"{kind}rw-r--r--   3 user group {size:>10} {stamp} {path}"


def main(argv):
    assert argv[0] == "fs", argv
    args = [a for a in argv[1:] if not a.startswith("-D")]
    cmd, rest = args[0], args[1:]
    if cmd == "-test":
        p = local(rest[1])
        return 0 if (os.path.exists(p) if rest[0] == "-e" else os.path.isdir(p)) else 1
    if cmd == "-mkdir":
        os.makedirs(local(rest[-1]))
        return 0
    if cmd in ("-ls", "-lsr"):
        base = rest[0].rstrip("/") or "/"
        if not os.path.exists(local(base)):
            return 1
        if cmd == "-ls":
            names = [f"{base.rstrip('/')}/{n}" for n in sorted(os.listdir(local(base)))]
        else:
            names = []
            for d, dirs, files in os.walk(local(base)):
                rel = "/" + os.path.relpath(d, ROOT).strip(".")
                names += [f"{rel.rstrip('/')}/{n}" for n in sorted(dirs + files)]
        print(f"Found {len(names)} items")
        for n in names:
            print(line(n))
        return 0
    if cmd == "-put":
        dst = local(rest[1])
        shutil.copy(rest[0], os.path.join(dst, os.path.basename(rest[0]))
                    if os.path.isdir(dst) else dst)
        return 0
    if cmd == "-get":
        shutil.copy(local(rest[0]), rest[1])
        return 0
    if cmd in ("-rm", "-rmr"):
        (shutil.rmtree if cmd == "-rmr" else os.remove)(local(rest[0]))
        return 0
    if cmd == "-mv":
        os.replace(local(rest[0]), local(rest[1]))
        return 0
    if cmd == "-cat":
        sys.stdout.write(open(local(rest[0])).read())
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
