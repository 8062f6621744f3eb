"""The Kubernetes manifests validate offline against the API's schemas.

No API server is needed: tests/deploy/node/validate.mjs checks each object
with the OpenAPI schemas compiled into the npm packages kubernetes-models
(Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler) and
@kubernetes-models/prometheus-operator (PodMonitor), pinned in
tests/deploy/node/package-lock.json and installed by
`scripts/install-deps.sh --test` (npm ci). `kubectl apply --dry-run=client`
is no alternative offline: it asks a server for the API's resources first.
Where kubectl is installed, `kubectl kustomize` also builds the
kustomization and its output is validated the same way.
"""

import copy
import glob
import json
import shutil
import subprocess
import unittest

import yaml

import deploy_support as ds

NODE_DIR = ds.SOURCE_DIR / "tests/deploy/node"
K8S_DIR = ds.DEPLOY_DIR / "kubernetes"


def validate(items):
    """[(source, object)] through validate.mjs: (exit code, {source#kind:
    errors})."""
    node = shutil.which("node")
    if node is None or not (NODE_DIR / "node_modules").is_dir():
        raise AssertionError("needs node and tests/deploy/node/node_modules "
                             "(scripts/install-deps.sh --test runs npm ci)")
    payload = json.dumps([{"source": s, "object": o} for s, o in items])
    done = subprocess.run([node, str(NODE_DIR / "validate.mjs")], input=payload,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120, cwd=NODE_DIR)
    results = {}
    for line in done.stdout.splitlines():
        r = json.loads(line)
        results[f"{r['source']}#{r['kind']}"] = r["errors"]
    if len(results) != len(items):
        raise AssertionError(f"validate.mjs answered {len(results)} of "
                             f"{len(items)}:\n{done.stdout}{done.stderr}")
    return done.returncode, results


def manifest_objects():
    """[(file name, object)] of deploy/kubernetes/*.yaml, without the
    Kustomization (kustomize's own file, not an API object)."""
    items = []
    for path in sorted(glob.glob(str(K8S_DIR / "*.yaml"))):
        for doc in ds.load_yaml_documents(path):
            if doc.get("kind") != "Kustomization":
                items.append((path.rsplit("/", 1)[1], doc))
    return items


class SchemaTest(unittest.TestCase):

    def test_every_manifest_validates(self):
        items = manifest_objects()
        kinds = {o["kind"] for _, o in items}
        self.assertEqual(kinds, {"Deployment", "Service", "PodDisruptionBudget",
                                 "HorizontalPodAutoscaler", "PodMonitor"})
        code, results = validate(items)
        self.assertEqual({k: e for k, e in results.items() if e}, {})
        self.assertEqual(code, 0)

    def test_the_validator_finds_errors(self):
        # The same objects with a wrong type, a missing required field and an
        # API version that does not exist: each must be refused.
        by_kind = {o["kind"]: o for _, o in manifest_objects()}
        deployment = copy.deepcopy(by_kind["Deployment"])
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        container["ports"][0]["containerPort"] = "grpc"
        no_name = copy.deepcopy(by_kind["Deployment"])
        del no_name["spec"]["template"]["spec"]["containers"][0]["name"]
        hpa = copy.deepcopy(by_kind["HorizontalPodAutoscaler"])
        hpa["apiVersion"] = "autoscaling/v2beta3"
        monitor = copy.deepcopy(by_kind["PodMonitor"])
        monitor["spec"]["podMetricsEndpoints"] = "metrics"
        code, results = validate([("port", deployment), ("name", no_name),
                                  ("version", hpa), ("monitor", monitor)])
        self.assertEqual(code, 1)
        self.assertIn("containerPort must be integer",
                      " ".join(results["port#Deployment"]))
        self.assertIn("required property name",
                      " ".join(results["name#Deployment"]))
        self.assertIn("no schema for autoscaling/v2beta3",
                      " ".join(results["version#HorizontalPodAutoscaler"]))
        self.assertTrue(results["monitor#PodMonitor"])

    @unittest.skipIf(shutil.which("kubectl") is None, "kubectl is not installed")
    def test_kustomization_builds_and_validates(self):
        _, text = ds.run(["kubectl", "kustomize", str(K8S_DIR)], timeout=120)

        objects = [d for d in yaml.safe_load_all(text) if d]
        resources = ds.load_yaml_documents(K8S_DIR / "kustomization.yaml")[0]["resources"]
        self.assertEqual(len(objects), len(resources))
        code, results = validate([("kustomize", o) for o in objects])
        self.assertEqual({k: e for k, e in results.items() if e}, {})
        self.assertEqual(code, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
