// Validates Kubernetes objects against the API's OpenAPI schemas, offline:
// the schemas compiled into the npm packages kubernetes-models (the built-in
// kinds) and @kubernetes-models/prometheus-operator (PodMonitor, ...), pinned
// in package-lock.json. Types, required fields, enums and formats are
// checked; fields the schema does not name are not (the API's schemas allow
// them), which tests/deploy/manifests_test.py covers for what h3serve uses.
//
// stdin: a JSON list of {"source": "...", "object": {...}}; stdout: one JSON
// line per object, {"source", "kind", "name", "errors": [...]}. Exit 0 when
// every object validated, 1 otherwise.
import fs from "node:fs";

const packages = ["kubernetes-models", "@kubernetes-models/prometheus-operator"];

async function modelClass(apiVersion, kind) {
  for (const pkg of packages) {
    try {
      const module = await import(`${pkg}/${apiVersion}/${kind}`);
      if (module[kind]) return module[kind];
    } catch (e) {
      if (e.code !== "ERR_MODULE_NOT_FOUND" && e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw e;
    }
  }
  return null;
}

const items = JSON.parse(fs.readFileSync(0, "utf8"));
let failed = 0;
for (const { source, object } of items) {
  const result = { source, kind: object.kind, name: object.metadata?.name ?? "", errors: [] };
  const Model = await modelClass(object.apiVersion, object.kind);
  if (!Model) {
    result.errors.push(`no schema for ${object.apiVersion} ${object.kind}`);
  } else {
    try {
      new Model(object).validate();
    } catch (e) {
      result.errors.push(...(e.errors ?? [e]).map(
        (x) => (x.instancePath !== undefined ? `${x.instancePath} ${x.message}` : String(x.message ?? x))));
    }
  }
  if (result.errors.length) failed++;
  console.log(JSON.stringify(result));
}
process.exit(failed ? 1 : 0);
