"""docker-compose.yml and the Kubernetes manifests parse, and name the ports,
probes, health services, grace periods and metrics h3serve really has: the
defaults come from `h3serve --help`, the health services and metric names
from a running h3serve."""

import glob
import os
import re
import shutil
import tempfile
import unittest

import deploy_support as ds

K8S_DIR = ds.DEPLOY_DIR / "kubernetes"
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def seconds(duration):
    """A compose duration ("40s", "1m30s") or a number, in seconds."""
    if isinstance(duration, (int, float)):
        return duration
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def quantity(value):
    """A Kubernetes quantity ("500m", "16Gi", 4) as a number."""
    units = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    number, unit = re.fullmatch(r"(\d+(?:\.\d+)?)([a-zA-Z]*)", str(value)).groups()
    return float(number) * units[unit]


def flag_values(args):
    """{"--flag": "value"} of an argument list of "--flag value" pairs."""
    assert len(args) % 2 == 0, args
    return dict(zip(args[::2], args[1::2]))


class KubernetesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.defaults = ds.h3serve_defaults()
        cls.objects = {}
        for path in sorted(glob.glob(str(K8S_DIR / "*.yaml"))):
            for doc in ds.load_yaml_documents(path):
                cls.objects[(doc["kind"], doc["metadata"]["name"]
                             if "metadata" in doc else "")] = (path, doc)
        cls.deployment = cls.one("Deployment")
        cls.pod = cls.deployment["spec"]["template"]
        cls.container = cls.pod["spec"]["containers"][0]
        cls.ports = {p["name"]: p["containerPort"]
                     for p in cls.container["ports"]}
        # A running h3serve: its health services and its metrics.
        cls.tmp = tempfile.mkdtemp(prefix="h3-manifests-")
        cls.server = ds.H3Serve(["--model", ds.make_model(cls.tmp)])
        cls.exported = ds.exported_metric_names(cls.server.metrics_text())

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def one(cls, kind):
        found = [doc for (k, _), (_, doc) in cls.objects.items() if k == kind]
        assert len(found) == 1, f"{len(found)} {kind} objects"
        return found[0]

    def test_every_manifest_has_api_version_kind_and_name(self):
        self.assertGreaterEqual(len(self.objects), 6)
        for (kind, name), (path, doc) in self.objects.items():
            with self.subTest(path=path):
                self.assertIn("apiVersion", doc)
                if kind != "Kustomization":
                    self.assertTrue(name)

    def test_kustomization_lists_the_manifests(self):
        resources = self.one("Kustomization")["resources"]
        for resource in resources:
            self.assertTrue((K8S_DIR / resource).is_file(), resource)
        # All but the PodMonitor, whose CRD the Prometheus Operator brings.
        listed = {os.path.basename(p) for p, d in self.objects.values()
                  if d["kind"] not in ("Kustomization", "PodMonitor")}
        self.assertEqual(listed, set(resources))
        images = {i["name"] for i in self.one("Kustomization")["images"]}
        self.assertIn(self.container["image"].split(":")[0], images)

    def test_container_ports_are_the_servers(self):
        flags = flag_values(self.container.get("args", []))
        for flag, name in (("--port", "grpc"), ("--http-port", "http"),
                           ("--metrics-port", "metrics")):
            port = int(flags.get(flag, self.defaults[flag]))
            self.assertEqual(self.ports[name], port, flag)
        self.assertEqual(int(self.defaults["--port"]), self.ports["grpc"])
        self.assertEqual(int(self.defaults["--metrics-port"]),
                         self.ports["metrics"])
        annotations = self.pod["metadata"]["annotations"]
        self.assertEqual(int(annotations["prometheus.io/port"]),
                         self.ports["metrics"])
        self.assertEqual(annotations["prometheus.io/path"], "/metrics")

    def test_probes_are_grpc_health_on_the_grpc_port(self):
        for probe in PROBES:
            with self.subTest(probe=probe):
                spec = self.container[probe]
                self.assertEqual(set(spec) & {"grpc", "httpGet", "tcpSocket",
                                              "exec"}, {"grpc"})
                self.assertEqual(spec["grpc"]["port"], self.ports["grpc"])

    def test_probed_health_services_answer_serving(self):
        for probe in PROBES:
            service = self.container[probe]["grpc"].get("service", "")
            with self.subTest(probe=probe, service=service):
                code, out = ds.run([ds.H3, "health", "--server",
                                    self.server.address, "--service", service],
                                   check=False)
                self.assertEqual((code, out), (0, "SERVING\n"))

    def test_a_gpu_per_pod(self):
        resources = self.container["resources"]
        self.assertEqual(resources["limits"]["nvidia.com/gpu"], 1)

    def test_termination_grace_outlasts_the_drain(self):
        flags = flag_values(self.container.get("args", []))
        drain = float(flags.get("--shutdown-grace",
                                self.defaults["--shutdown-grace"]))
        self.assertGreater(self.pod["spec"]["terminationGracePeriodSeconds"],
                           drain)

    def test_runs_as_the_images_non_root_user(self):
        security = self.pod["spec"]["securityContext"]
        self.assertTrue(security["runAsNonRoot"])
        for dockerfile in ("Dockerfile.cpu", "Dockerfile.cuda"):
            text = (ds.DEPLOY_DIR / dockerfile).read_text()
            user = re.findall(r"^USER (\d+):(\d+)$", text, re.M)[-1]
            self.assertEqual((security["runAsUser"], security["runAsGroup"]),
                             tuple(map(int, user)), dockerfile)

    def test_headless_service_for_grpc_balancing(self):
        service = self.one("Service")
        self.assertEqual(service["spec"]["clusterIP"], "None")
        self.assertLessEqual(service["spec"]["selector"].items(),
                             self.pod["metadata"]["labels"].items())
        ports = {p["name"]: p for p in service["spec"]["ports"]}
        self.assertEqual(ports["grpc"]["appProtocol"], "grpc")
        for port in ports.values():
            self.assertIn(port["targetPort"], self.ports)
            self.assertEqual(port["port"], self.ports[port["targetPort"]])

    def test_pdb_and_podmonitor_select_the_pods(self):
        labels = self.pod["metadata"]["labels"].items()
        for kind in ("PodDisruptionBudget", "PodMonitor"):
            selector = self.one(kind)["spec"]["selector"]["matchLabels"]
            self.assertLessEqual(selector.items(), labels, kind)
        for endpoint in self.one("PodMonitor")["spec"]["podMetricsEndpoints"]:
            self.assertIn(endpoint["port"], self.ports)
            self.assertEqual(endpoint["path"], "/metrics")

    def test_hpa_scales_the_deployment_on_the_adapters_metric(self):
        hpa = self.one("HorizontalPodAutoscaler")["spec"]
        self.assertEqual((hpa["scaleTargetRef"]["kind"],
                          hpa["scaleTargetRef"]["name"]),
                         ("Deployment", self.deployment["metadata"]["name"]))
        self.assertGreaterEqual(hpa["minReplicas"], 2)  # the PDB lets one go
        values = ds.load_yaml_documents(K8S_DIR / "prometheus-adapter/values.yaml")
        served = {r["name"]["as"] for r in values[0]["rules"]["custom"]}
        for metric in hpa["metrics"]:
            name = metric["pods"]["metric"]["name"]
            self.assertEqual(metric["type"], "Pods")
            self.assertIn(name, served)
            self.assertIn(name, self.exported)
            # Named in the server's source too, not only exported today.
            metrics_cc = (ds.SOURCE_DIR / "server/metrics.cc").read_text()
            self.assertTrue(f'"{name}"' in metrics_cc,
                            f"{name} is not in server/metrics.cc")

    def test_resources_and_threads_agree(self):
        resources = self.container["resources"]
        for name, request in resources["requests"].items():
            with self.subTest(resource=name):
                self.assertIn(name, resources["limits"])
                self.assertLessEqual(quantity(request),
                                     quantity(resources["limits"][name]))
        # The engine's threads come from the CPU limit, which h3serve reads
        # as H3_NUM_THREADS (its --threads default).
        env = {e["name"]: e for e in self.container["env"]}
        field = env["H3_NUM_THREADS"]["valueFrom"]["resourceFieldRef"]
        self.assertEqual(field["resource"], "limits.cpu")
        self.assertGreaterEqual(quantity(resources["limits"]["cpu"]), 1)
        _, help_text = ds.run([ds.H3SERVE, "--help"])
        self.assertIn("$H3_NUM_THREADS", help_text)


class ComposeTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.defaults = ds.h3serve_defaults()
        cls.compose = ds.load_yaml_documents(ds.DEPLOY_DIR / "docker-compose.yml")[0]
        cls.services = cls.compose["services"]

    def test_builds_the_images_from_the_repository(self):
        for path in ("docker-compose.yml", "docker-compose.gpu.yml"):
            compose = ds.load_yaml_documents(ds.DEPLOY_DIR / path)[0]
            build = compose["services"]["h3serve"]["build"]
            context = (ds.DEPLOY_DIR / build["context"]).resolve()
            self.assertEqual(context, ds.SOURCE_DIR.resolve(), path)
            self.assertTrue((context / build["dockerfile"]).is_file(), path)

    def test_publishes_the_servers_ports(self):
        published = {int(p.split(":")[-1])
                     for p in self.services["h3serve"]["ports"]}
        self.assertEqual(published, {int(self.defaults["--port"]),
                                     int(self.defaults["--http-port"]),
                                     int(self.defaults["--metrics-port"])})

    def test_stop_grace_outlasts_the_drain(self):
        self.assertGreater(seconds(self.services["h3serve"]["stop_grace_period"]),
                           float(self.defaults["--shutdown-grace"]))

    def test_prometheus_targets_name_the_h3serve_service(self):
        prometheus = self.services["prometheus"]
        config = next(a.split("=", 1)[1] for a in prometheus["command"]
                      if a.startswith("--config.file="))
        mounts = {v.split(":")[1]: v.split(":")[0] for v in prometheus["volumes"]}
        self.assertEqual(mounts[os.path.dirname(config)], "./prometheus")
        config_yaml = ds.load_yaml_documents(ds.DEPLOY_DIR / "prometheus/prometheus.yml")[0]
        patterns = [f for job in config_yaml["scrape_configs"]
                    for sd in job["file_sd_configs"] for f in sd["files"]]
        files = [p for pattern in patterns
                 for p in glob.glob(str(ds.DEPLOY_DIR / "prometheus" / pattern))]
        targets = {t for f in files for group in ds.load_yaml_documents(f)[0]
                   for t in group["targets"]}
        self.assertEqual(targets, {"h3serve:" + self.defaults["--metrics-port"]})

    def test_grafana_provisioning_is_mounted_where_it_points(self):
        grafana = self.services["grafana"]
        mounts = {v.split(":")[0]: v.split(":")[1] for v in grafana["volumes"]}
        self.assertEqual(mounts["./grafana/provisioning"], "/etc/grafana/provisioning")
        provider = ds.load_yaml_documents(
            ds.DEPLOY_DIR / "grafana/provisioning/dashboards/h3serve.yml")[0]
        self.assertEqual(provider["providers"][0]["options"]["path"],
                         mounts["./grafana/dashboards"])
        home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
        self.assertTrue((ds.DEPLOY_DIR / "grafana/dashboards" /
                         os.path.relpath(home, mounts["./grafana/dashboards"])).is_file())
        source = ds.load_yaml_documents(
            ds.DEPLOY_DIR / "grafana/provisioning/datasources/prometheus.yml")[0]
        self.assertEqual(source["datasources"][0]["url"], "http://prometheus:9090")
        self.assertIn("prometheus", self.services)


if __name__ == "__main__":
    unittest.main(verbosity=2)
