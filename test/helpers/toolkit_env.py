"""A training command for tests of `sluice run`: loads the container environment the way
sagemaker-training-toolkit's Environment does, and checks what sluice set against it.

It finds the config through SAGEMAKER_BASE_DIR (else /opt/ml), reads hyperparameters.json,
resourceconfig.json and inputdataconfig.json as the toolkit does (json.load; each
hyperparameter json.loads-ed, the raw string when that fails), derives the toolkit's
variables from them with Python's own json.dumps(sort_keys=True, separators=(",", ":"))
and str(), and compares each with os.environ. With TOOLKIT_SRC set to a checkout's src/
folder, it also imports sagemaker_training.environment and compares with
Environment().to_env_vars() itself.

Usage: python3 toolkit_env.py REPORT.json [EXIT_CODE]; writes {"mismatches": [...],
"checked": [...], "files": {...}, "real_toolkit": bool} and exits with EXIT_CODE (0).
"""
import json
import multiprocessing
import os
import sys

base = os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml")
config = os.path.join(base, "input", "config")


def load(name):
    with open(os.path.join(config, name)) as f:
        return json.load(f)


hps_file = load("hyperparameters.json")
rc = load("resourceconfig.json")
idc = load("inputdataconfig.json")

hps_all = {}
for k, v in hps_file.items():
    try:
        v = json.loads(v)
    except (ValueError, TypeError):
        pass
    hps_all[k] = v

OWN = {"sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics", "sagemaker_region",
       "sagemaker_container_log_level", "sagemaker_job_name", "default_user_module_name", "_tuning_objective_metric",
       "sagemaker_s3_output"}
toolkit_params = {k: v for k, v in hps_all.items() if k in OWN or k.startswith("sagemaker_")}
hps = {k: v for k, v in hps_all.items() if k not in toolkit_params}
framework_params = {k: v for k, v in toolkit_params.items() if k not in OWN}


def dumps(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return dumps(v)


def cmd_args(m):
    out = []
    for k in sorted(m):
        out.append("--%s" % k if len(k) > 1 else "-%s" % k)
        v = m[k]
        if hasattr(v, "items"):
            out.append(",".join("%s=%s" % (a, b) for a, b in sorted(v.items())))
        else:
            out.append("" if v is None else str(v))
    return out


group = rc.get("current_group_name", "homogeneousCluster")
groups = rc.get("instance_groups", [])
hosts = rc["hosts"]
expected = {
    "SM_HOSTS": fmt(hosts),
    "SM_CURRENT_HOST": fmt(rc["current_host"]),
    "SM_NETWORK_INTERFACE_NAME": fmt(rc.get("network_interface_name", "eth0")),
    "SM_HPS": fmt(hps),
    "SM_FRAMEWORK_PARAMS": fmt(framework_params),
    "SM_RESOURCE_CONFIG": fmt(rc),
    "SM_INPUT_DATA_CONFIG": fmt(idc),
    "SM_CHANNELS": fmt(sorted(idc)),
    "SM_CURRENT_INSTANCE_TYPE": fmt(rc.get("current_instance_type", "local")),
    "SM_CURRENT_INSTANCE_GROUP": fmt(group),
    "SM_CURRENT_INSTANCE_GROUP_HOSTS": fmt(next((g["hosts"] for g in groups if g["instance_group_name"] == group), [])),
    "SM_INSTANCE_GROUPS": fmt([g["instance_group_name"] for g in groups]),
    "SM_INSTANCE_GROUPS_DICT": fmt({g["instance_group_name"]: g for g in groups}),
    "SM_IS_HETERO": fmt(len(groups) > 1),
    "SM_LOG_LEVEL": fmt(toolkit_params.get("sagemaker_container_log_level", 20)),
    "SM_NUM_CPUS": fmt(multiprocessing.cpu_count()),
    "SM_MODEL_DIR": os.path.join(base, "model"),
    "SM_INPUT_DIR": os.path.join(base, "input"),
    "SM_INPUT_CONFIG_DIR": config,
    "SM_OUTPUT_DIR": os.path.join(base, "output"),
    "SM_OUTPUT_DATA_DIR": os.path.join(base, "output", "data"),
    "SM_OUTPUT_INTERMEDIATE_DIR": os.path.join(base, "output", "intermediate"),
    "SM_MODULE_DIR": str(toolkit_params.get("sagemaker_submit_directory", os.path.join(base, "code"))),
    "SM_USER_ARGS": fmt(cmd_args(hps)),
    "CURRENT_HOST": rc["current_host"],
}
for c in idc:
    expected["SM_CHANNEL_%s" % c.upper()] = os.path.join(base, "input", "data", c)
for k, v in hps.items():
    expected["SM_HP_%s" % k.upper()] = fmt(v)

training_env = json.loads(os.environ.get("SM_TRAINING_ENV", "{}"))
checks = [
    ("SM_TRAINING_ENV is compact and sorted", os.environ.get("SM_TRAINING_ENV") == dumps(training_env)),
    ("SM_TRAINING_ENV.hyperparameters", training_env.get("hyperparameters") == hps),
    ("SM_TRAINING_ENV.resource_config", training_env.get("resource_config") == rc),
    ("SM_TRAINING_ENV.input_data_config", training_env.get("input_data_config") == idc),
    ("SM_TRAINING_ENV.channel_input_dirs", training_env.get("channel_input_dirs") == {c: os.path.join(base, "input", "data", c) for c in idc}),
    ("SM_TRAINING_ENV.num_cpus", training_env.get("num_cpus") == multiprocessing.cpu_count()),
    ("SM_NUM_GPUS is a count", os.environ.get("SM_NUM_GPUS", "").isdigit()),
    ("SM_NUM_NEURONS is a count", os.environ.get("SM_NUM_NEURONS", "").isdigit()),
]

mismatches = [{"name": k, "want": v, "got": os.environ.get(k)} for k, v in expected.items() if os.environ.get(k) != v]
mismatches += [{"name": name, "want": True, "got": False} for name, ok in checks if not ok]

real = False
if os.environ.get("TOOLKIT_SRC"):
    sys.path.insert(0, os.environ["TOOLKIT_SRC"])
    from sagemaker_training import environment  # noqa: E402

    real = True
    for k, v in environment.Environment().to_env_vars().items():
        if os.environ.get(k) != v:
            mismatches.append({"name": "toolkit " + k, "want": v, "got": os.environ.get(k)})

with open(sys.argv[1], "w") as f:
    json.dump({"mismatches": mismatches, "checked": sorted(expected) + [c[0] for c in checks], "real_toolkit": real,
               "files": {"hyperparameters": hps_file, "resourceconfig": rc, "inputdataconfig": idc},
               "env": {k: v for k, v in os.environ.items() if k.startswith("SM_") or k.startswith("SAGEMAKER_")}}, f)
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
