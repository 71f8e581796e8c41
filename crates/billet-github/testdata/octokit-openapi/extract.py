# Keeps, from @octokit/openapi's generated/api.github.com.deref.json, the
# operations billet calls (every $ref already inlined by the package), as
#   python3 extract.py PATH/TO/api.github.com.deref.json > operations.json
import json
import sys

OPERATIONS = [
    ("post", "/orgs/{org}/actions/runners/generate-jitconfig"),
    ("post", "/repos/{owner}/{repo}/actions/runners/generate-jitconfig"),
    ("get", "/orgs/{org}/actions/runners"),
    ("get", "/repos/{owner}/{repo}/actions/runners"),
    ("delete", "/orgs/{org}/actions/runners/{runner_id}"),
    ("delete", "/repos/{owner}/{repo}/actions/runners/{runner_id}"),
    ("get", "/repos/{owner}/{repo}/actions/runs/{run_id}"),
    ("get", "/repos/{owner}/{repo}/actions/jobs/{job_id}"),
    ("get", "/repos/{owner}/{repo}/actions/runs"),
    ("get", "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs"),
    ("post", "/app/installations/{installation_id}/access_tokens"),
    ("get", "/orgs/{org}/installation"),
    ("get", "/repos/{owner}/{repo}/installation"),
]

description = json.load(open(sys.argv[1]))
kept = {"openapi": description["openapi"], "info": description["info"], "paths": {}}
for method, path in OPERATIONS:
    kept["paths"].setdefault(path, {})[method] = description["paths"][path][method]
json.dump(kept, sys.stdout, indent=1, ensure_ascii=False)
sys.stdout.write("\n")
