package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of Kustomize's file the base uses, decoded
// strictly too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name   string `json:"name"`
		NewTag string `json:"newTag"`
	} `json:"images"`
}

// manifests are the decoded files of kubernetes/.
type manifests struct {
	daemonSet *appsv1.DaemonSet
	service   *corev1.Service
	job       *batchv1.Job
	namespace *corev1.Namespace
	kustomize kustomization
}

// loadManifests decodes every file of kubernetes/ strictly (an unknown or
// misspelt field fails) into its API type.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	var m manifests
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
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
		case "Kustomization":
			obj = &m.kustomize
		default:
			t.Fatalf("%s: unexpected kind %q", f, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(data, obj); err != nil {
			t.Errorf("%s does not decode strictly as a %s: %v", f, meta.Kind, err)
		}
	}
	if m.daemonSet == nil || m.service == nil || m.job == nil || m.namespace == nil || m.kustomize.Kind == "" {
		t.Fatal("kubernetes/ lacks one of DaemonSet, Service, Job, Namespace, Kustomization")
	}
	return m
}

// The manifests are valid API objects and hold together: the Kustomize
// base lists every file; the Service reaches the DaemonSet's pods and
// port; probes ask /healthz; requests equal limits; the Job is Indexed,
// and its pods take --shard INDEX/COMPLETIONS.
func TestManifests(t *testing.T) {
	m := loadManifests(t)
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(m.kustomize.Resources, base) {
			t.Errorf("kustomization.yaml does not list %s", base)
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
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("%s probe is not GET /healthz", name)
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

// The unit verifies with systemd-analyze, without a warning (an unknown
// key is only a warning to systemd).
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package)")
	}
	unit, err := os.ReadFile("systemd/microbox.service")
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's binary is an executable file: point
	// it at one, which is all it looks at.
	dir := t.TempDir()
	bin := filepath.Join(dir, "microbox")
	os.WriteFile(bin, nil, 0o755)
	path := filepath.Join(dir, "microbox.service")
	os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/microbox"), []byte(bin)), 0o644)
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, want := range []string{"Delegate=cpu memory pids", "RuntimeDirectoryPreserve=yes", "KillMode=mixed", "Restart=on-failure"} {
		if !strings.Contains(string(unit), "\n"+want+"\n") {
			t.Errorf("the unit lacks %s", want)
		}
	}
}
