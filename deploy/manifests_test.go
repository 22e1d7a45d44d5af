package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of Kustomize's file (a Kustomization, or a
// Component: an optional part an overlay adds) the manifests use, decoded
// strictly too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Components []string `json:"components"`
	Patches    []struct {
		Path   string `json:"path"`
		Target struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
	Images []struct {
		Name   string `json:"name"`
		NewTag string `json:"newTag"`
	} `json:"images"`
}

// manifests are the decoded files of kubernetes/ and its directories:
// each object (its JSON, by file), each kustomization (by directory),
// each RFC 6902 patch (by file), and the objects the tests look at.
type manifests struct {
	objects        map[string][]byte
	kustomizations map[string]kustomization
	patches        map[string][]patchOp

	daemonSet *appsv1.DaemonSet
	service   *corev1.Service
	job       *batchv1.Job
	namespace *corev1.Namespace
}

// patchOp is one operation of an RFC 6902 patch.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// loadManifests decodes every file under kubernetes/ strictly (an unknown
// or misspelt field fails): kustomizations, the patches they name, and
// the objects, each into its API type.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	m := manifests{objects: map[string][]byte{}, kustomizations: map[string]kustomization{}, patches: map[string][]patchOp{}}
	files := manifestFiles(t)
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			var k kustomization
			decodeStrict(t, f, &k)
			m.kustomizations[filepath.Dir(f)] = k
			for _, p := range k.Patches {
				m.patches[filepath.Join(filepath.Dir(f), p.Path)] = nil
			}
		}
	}
	for _, f := range files {
		if _, ok := m.patches[f]; ok {
			var ops []patchOp
			decodeStrict(t, f, &ops)
			m.patches[f] = ops
		} else if filepath.Base(f) != "kustomization.yaml" {
			m.loadObject(t, f)
		}
	}
	if m.daemonSet == nil || m.service == nil || m.job == nil || m.namespace == nil || m.kustomizations["kubernetes"].Kind == "" {
		t.Fatal("kubernetes/ lacks one of DaemonSet, Service, Job, Namespace, kustomization.yaml")
	}
	return m
}

// manifestFiles are the YAML files under kubernetes/.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("kubernetes", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// loadObject decodes file f strictly into the API type of its kind, and
// keeps its JSON for the kustomizations' builds.
func (m *manifests) loadObject(t *testing.T, f string) {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	var obj any
	switch meta.Kind {
	case "DaemonSet":
		m.daemonSet = &appsv1.DaemonSet{}
		obj = m.daemonSet
	case "Service":
		m.service = &corev1.Service{}
		obj = m.service
	case "Job":
		m.job = &batchv1.Job{}
		obj = m.job
	case "Namespace":
		m.namespace = &corev1.Namespace{}
		obj = m.namespace
	case "PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	default:
		t.Fatalf("%s: unexpected kind %q", f, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Errorf("%s does not decode strictly as a %s: %v", f, meta.Kind, err)
	}
	if m.objects[f], err = yaml.YAMLToJSON(data); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
}

func decodeStrict(t *testing.T, f string, v any) {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Errorf("%s does not decode strictly as a %T: %v", f, v, err)
	}
}

// The manifests are valid API objects and hold together: each
// kustomization lists every file of its directory; the Service reaches
// the DaemonSet's pods and port; readiness asks /healthz (is a run
// possible here), liveness /healthz?live (does the server answer: a
// host's problem must not restart it without end); requests equal limits;
// the Job is Indexed, and its pods take --shard INDEX/COMPLETIONS.
func TestManifests(t *testing.T) {
	m := loadManifests(t)
	for _, f := range manifestFiles(t) {
		dir, base := filepath.Split(f)
		k := m.kustomizations[filepath.Clean(dir)]
		_, patch := m.patches[f]
		if base != "kustomization.yaml" && !patch && !slices.Contains(k.Resources, base) {
			t.Errorf("%skustomization.yaml does not list %s", dir, base)
		}
	}
	ds := m.daemonSet.Spec.Template
	if sel := m.service.Spec.Selector; !labelsMatch(sel, ds.Labels) {
		t.Errorf("the Service selects %v, the DaemonSet's pods are %v", sel, ds.Labels)
	}
	c := ds.Spec.Containers[0]
	port := m.service.Spec.Ports[0].TargetPort.String()
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == port }) {
		t.Errorf("the Service targets port %q, which the container does not name", port)
	}
	for name, want := range map[string]struct {
		probe *corev1.Probe
		path  string
	}{"liveness": {c.LivenessProbe, "/healthz?live"}, "readiness": {c.ReadinessProbe, "/healthz"}} {
		if p := want.probe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want.path || p.HTTPGet.Port.String() != port {
			t.Errorf("the %s probe is not GET %s on port %s: %+v", name, want.path, port, p)
		}
	}
	if !slices.Contains(c.Args, "--http") {
		t.Errorf("the DaemonSet's server has no --http: %v", c.Args)
	}
	job := m.job.Spec.Template.Spec.Containers[0]
	for _, ctr := range []corev1.Container{c, job} {
		checkResources(t, ctr)
		checkSecurity(t, ctr)
	}
	if m.job.Spec.CompletionMode == nil || *m.job.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Error("the Job is not Indexed")
	}
	shard := "$(JOB_COMPLETION_INDEX)/" + itoa(*m.job.Spec.Completions)
	if i := slices.Index(job.Args, "--shard"); i < 0 || job.Args[i+1] != shard {
		t.Errorf("the Job's pods do not take --shard %s: %v", shard, job.Args)
	}
}

func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func itoa(n int32) string { b, _ := json.Marshal(n); return string(b) }

// checkResources: a container's requests are its limits (a Guaranteed
// pod: runs are never squeezed by a neighbour's burst), and its memory
// covers its runs at the default --mem.
func checkResources(t *testing.T, c corev1.Container) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.IsZero() || req.Cmp(lim) != 0 {
			t.Errorf("%s: %s request %v, limit %v: want equal and set", c.Name, r, req.String(), lim.String())
		}
	}
	cpus := c.Resources.Limits.Cpu().Value()
	need := resource.MustParse("256Mi")
	need.Set(need.Value() * (cpus + 1)) // a run per CPU, and the server
	if c.Resources.Limits.Memory().Cmp(need) < 0 {
		t.Errorf("%s: memory limit %v is below %d runs of 256Mi and the server's own", c.Name, c.Resources.Limits.Memory(), cpus)
	}
}

// checkSecurity: never privileged; every capability dropped but those
// docs/deploy.md lists.
func checkSecurity(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged {
		t.Errorf("%s: privileged is not false", c.Name)
		return
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: capabilities are not dropped first", c.Name)
	}
}

// The units verify with systemd-analyze, without a warning (an unknown
// key is only a warning to systemd): the socket-activated exec server
// (microbox.socket, microbox.service) and the HTTP API's service.
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package)")
	}
	// verify checks that ExecStart's binary is an executable file: point
	// it at one, which is all it looks at.
	dir := t.TempDir()
	bin := filepath.Join(dir, "microbox")
	os.WriteFile(bin, nil, 0o755)
	units := map[string][]byte{}
	var paths []string
	for _, name := range []string{"microbox.socket", "microbox.service", "microbox-http.service"} {
		unit, err := os.ReadFile("systemd/" + name)
		if err != nil {
			t.Fatal(err)
		}
		units[name] = unit
		path := filepath.Join(dir, name)
		os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/microbox"), []byte(bin)), 0o644)
		paths = append(paths, path)
	}
	out, err := exec.Command("systemd-analyze", append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, name := range []string{"microbox.service", "microbox-http.service"} {
		for _, want := range []string{"Delegate=cpu memory pids", "RuntimeDirectoryPreserve=yes", "KillMode=mixed", "Restart=on-failure"} {
			if !strings.Contains(string(units[name]), "\n"+want+"\n") {
				t.Errorf("%s lacks %s", name, want)
			}
		}
	}
	// The server refuses a socket others may use, and serves the one the
	// client looks for by default.
	for _, want := range []string{"ListenStream=/run/microbox/exec.sock", "SocketMode=0600"} {
		if !strings.Contains(string(units["microbox.socket"]), "\n"+want+"\n") {
			t.Errorf("microbox.socket lacks %s", want)
		}
	}
	if !strings.Contains(string(units["microbox.service"]), " --idle-exit ") {
		t.Error("the socket-activated microbox.service does not exit when idle")
	}
}

// built is one object of a kustomization's build: its file, kind, name,
// namespace and JSON, patched.
type built struct {
	file, kind, name, namespace string
	json                        []byte
}

// build is what applying kustomization dir deploys, as Kustomize builds
// it: its resources (files, and other kustomizations' builds), then its
// components' patches and its own. Each patch must change some object.
func (m manifests) build(t *testing.T, dir string) []built {
	t.Helper()
	k := m.kustomizations[dir]
	var out []built
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if data, ok := m.objects[p]; ok {
			var meta metav1.PartialObjectMetadata
			json.Unmarshal(data, &meta)
			out = append(out, built{file: p, kind: meta.Kind, name: meta.Name, namespace: meta.Namespace, json: data})
		} else if sub, ok := m.kustomizations[p]; ok && sub.Kind == "Kustomization" {
			out = append(out, m.build(t, p)...)
		} else {
			t.Errorf("%s/kustomization.yaml: resource %s is neither a manifest nor a kustomization", dir, r)
		}
	}
	for _, c := range k.Components {
		p := filepath.Join(dir, c)
		if m.kustomizations[p].Kind != "Component" {
			t.Errorf("%s/kustomization.yaml: component %s is not a Kustomize Component", dir, c)
		}
		out = m.patch(t, p, out)
	}
	return m.patch(t, dir, out)
}

// patch applies kustomization dir's patches to the objects they target.
func (m manifests) patch(t *testing.T, dir string, objs []built) []built {
	t.Helper()
	for _, p := range m.kustomizations[dir].Patches {
		file := filepath.Join(dir, p.Path)
		matched := false
		for i, o := range objs {
			if o.kind != p.Target.Kind || (p.Target.Name != "" && o.name != p.Target.Name) {
				continue
			}
			var doc any
			json.Unmarshal(o.json, &doc)
			for _, op := range m.patches[file] {
				var err error
				if doc, err = applyOp(doc, op); err != nil {
					t.Errorf("%s: %s %s on %s: %v", file, op.Op, op.Path, o.file, err)
				}
			}
			objs[i].json, _ = json.Marshal(doc)
			matched = true
		}
		if !matched {
			t.Errorf("%s: the patch targets a %s %q, which the build lacks", file, p.Target.Kind, p.Target.Name)
		}
	}
	return objs
}

// applyOp applies one RFC 6902 operation (add, replace or remove) to doc.
func applyOp(doc any, op patchOp) (any, error) {
	if !strings.HasPrefix(op.Path, "/") || !slices.Contains([]string{"add", "replace", "remove"}, op.Op) {
		return doc, fmt.Errorf("the test applies add, replace and remove at absolute paths only")
	}
	keys := strings.Split(op.Path[1:], "/")
	return applyAt(doc, keys, op)
}

func applyAt(node any, keys []string, op patchOp) (any, error) {
	key := strings.ReplaceAll(strings.ReplaceAll(keys[0], "~1", "/"), "~0", "~")
	last := len(keys) == 1
	switch n := node.(type) {
	case map[string]any:
		if _, ok := n[key]; !ok && !(last && op.Op == "add") {
			return node, fmt.Errorf("no member %q", key)
		}
		if !last {
			child, err := applyAt(n[key], keys[1:], op)
			n[key] = child
			return n, err
		}
		if op.Op == "remove" {
			delete(n, key)
		} else {
			n[key] = op.Value
		}
		return n, nil
	case []any:
		i, err := strconv.Atoi(key)
		if key == "-" && last && op.Op == "add" {
			i, err = len(n), nil
		}
		if err != nil || i < 0 || i > len(n) || (i == len(n) && !(last && op.Op == "add")) {
			return node, fmt.Errorf("no element %q of %d", key, len(n))
		}
		switch {
		case !last:
			child, err := applyAt(n[i], keys[1:], op)
			n[i] = child
			return n, err
		case op.Op == "add":
			return slices.Insert(n, i, op.Value), nil
		case op.Op == "remove":
			return slices.Delete(n, i, i+1), nil
		}
		n[i] = op.Value
		return n, nil
	}
	return node, fmt.Errorf("%q is below a scalar", key)
}

// Each kustomization deploys only what it defines, whole: every resource
// is there, no object twice, every namespace its objects live in and
// every volume claim its pods mount is in the same build (the base does
// not start the eval Job, whose claim is eval/'s). The no-cgroup
// component, added to the base, gives the server --no-cgroup and changes
// nothing else.
func TestManifestsKustomizations(t *testing.T) {
	m := loadManifests(t)
	for dir, k := range m.kustomizations {
		if k.Kind == "Kustomization" {
			checkBuild(t, dir, m.build(t, dir))
		}
	}
	base := m.build(t, "kubernetes")
	if slices.ContainsFunc(base, func(o built) bool { return o.kind == "Job" }) {
		t.Error("the base starts a Job: it belongs in eval/")
	}
	m.kustomizations["overlay"] = kustomization{Kind: "Kustomization", Resources: []string{"../kubernetes"}, Components: []string{"../kubernetes/no-cgroup"}}
	variant := m.build(t, "overlay")
	checkBuild(t, "a base with the no-cgroup component", variant)
	args := func(objs []built) []string {
		for _, o := range objs {
			if o.kind == "DaemonSet" {
				var ds appsv1.DaemonSet
				json.Unmarshal(o.json, &ds)
				return ds.Spec.Template.Spec.Containers[0].Args
			}
		}
		return nil
	}
	if got, want := args(variant), append(args(base), "--no-cgroup"); !slices.Equal(got, want) {
		t.Errorf("the no-cgroup variant's server takes %q, want %q", got, want)
	}
}

// checkBuild checks one build for what it must define itself.
func checkBuild(t *testing.T, name string, objs []built) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range objs {
		if id := o.kind + " " + o.namespace + "/" + o.name; seen[id] {
			t.Errorf("%s: %s twice", name, id)
		} else {
			seen[id] = true
		}
	}
	for _, o := range objs {
		if o.namespace != "" && !seen["Namespace /"+o.namespace] {
			t.Errorf("%s: %s %s is in namespace %s, which it does not define", name, o.kind, o.name, o.namespace)
		}
		var pod struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		json.Unmarshal(o.json, &pod)
		for _, v := range pod.Spec.Template.Spec.Volumes {
			if c := v.PersistentVolumeClaim; c != nil && !seen["PersistentVolumeClaim "+o.namespace+"/"+c.ClaimName] {
				t.Errorf("%s: %s %s mounts the claim %s, which it does not define", name, o.kind, o.name, c.ClaimName)
			}
		}
	}
}

// Kustomize itself builds every kustomization, and the base with the
// no-cgroup component, when kubectl is installed (the checks above do
// not need it).
func TestManifestsKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: TestManifestsKustomizations checks the same without it")
	}
	m := loadManifests(t)
	overlay := t.TempDir()
	abs, err := filepath.Abs("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(overlay, abs)
	os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte("resources: ["+rel+"]\ncomponents: ["+rel+"/no-cgroup]\n"), 0o644)
	dirs := []string{overlay}
	for dir, k := range m.kustomizations {
		if k.Kind == "Kustomization" {
			dirs = append(dirs, dir)
		}
	}
	for _, dir := range dirs {
		if out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput(); err != nil {
			t.Errorf("kubectl kustomize %s: %v\n%s", dir, err, out)
		} else if dir == overlay && !bytes.Contains(out, []byte("- --no-cgroup\n")) {
			t.Errorf("the base with the no-cgroup component has no --no-cgroup:\n%s", out)
		}
	}
}
