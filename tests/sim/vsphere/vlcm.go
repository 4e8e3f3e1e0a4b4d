package main

// vSphere Lifecycle Manager (vLCM) desired images, as /api/esx/settings serves them on
// vCenter 8.0: offline depots, per-cluster desired software (base image + components),
// drafts, commit, compliance and remediation ("apply"). govmomi v0.52.0's stubs keep one
// global draft list with dummy depot content and never change an image; these handlers
// take over their paths (and /api/cis/tasks for the tasks they start).
//
// - A cluster is managed by an image when the fleet says `lifecycle: vlcm`; its desired
//   image starts with the NVIDIA component at the driver version most of its hosts have
//   installed (ties: the newest). Other clusters answer enablement {enabled: false} and
//   400 NOT_ALLOWED_IN_CURRENT_STATE on the image endpoints.
// - An offline depot's content follows the bundle file name:
//   NVD-AIE-800_<version>_<build>.zip offers component NVD-AIE-800 at <version>; any
//   other file name imports a depot without NVIDIA components.
// - Compliance is computed when asked from each host's installed driver (the VIB on disk).
// - Apply takes each non-compliant, connected host in name order through the simulator's
//   own maintenance mode (vGPU VMs block it), install and reboot, then out of maintenance
//   mode; the task fails at the first host that cannot be remediated.
// Every call needs a valid vmware-api-session-id (checked against vcsim's session store).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

const (
	vlcmSettingsPath = "/api/esx/settings/"
	vlcmTasksPath    = "/api/cis/tasks/"
	vlcmBaseImage    = "8.0.3-0.0.24022510"
	vlcmBaseDisplay  = "ESXi 8.0 U3"
)

// clusterLifecycle holds the fleet's `lifecycle` per cluster name (set by fleet.expand).
var clusterLifecycle = map[string]string{}

var vlcmBundleRE = regexp.MustCompile(`^(NVD-AIE-[0-9]+)_(.+)_([0-9]+)\.zip$`)

type vlcmDepot struct {
	Location    string
	Description string
	SourceType  string
	Components  map[string]string // component -> version
}

type vlcmImage struct {
	BaseImage  string
	Components map[string]string
}

func (i *vlcmImage) copy() *vlcmImage {
	c := &vlcmImage{BaseImage: i.BaseImage, Components: map[string]string{}}
	for k, v := range i.Components {
		c.Components[k] = v
	}
	return c
}

type vlcmDraft struct {
	Cluster string
	Image   *vlcmImage
}

type vlcmTask struct {
	Operation string
	Status    string
	Result    any
	Error     string
	Start     time.Time
	End       time.Time
}

type vlcmAPI struct {
	svc *simulator.Service
	reg *simulator.Registry

	mu       sync.Mutex
	depots   map[string]*vlcmDepot
	images   map[string]*vlcmImage // cluster moid -> desired image
	drafts   map[string]*vlcmDraft
	tasks    map[string]*vlcmTask
	seq      int
	applying map[string]bool
}

// HandleFunc swallows govmomi's stub registrations under our paths.
func (v *vlcmAPI) HandleFunc(string, func(http.ResponseWriter, *http.Request)) {}

func init() {
	simulator.RegisterEndpoint(func(s *simulator.Service, r *simulator.Registry) {
		if !r.IsVPX() {
			return
		}
		v := &vlcmAPI{svc: s, reg: r, depots: map[string]*vlcmDepot{}, images: map[string]*vlcmImage{},
			drafts: map[string]*vlcmDraft{}, tasks: map[string]*vlcmTask{}, applying: map[string]bool{}}
		s.ServeMux.Handle(vlcmSettingsPath, v)
		s.ServeMux.Handle(vlcmTasksPath, v)
	})
}

func vlcmJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

func vlcmErr(w http.ResponseWriter, code int, kind, format string, args ...any) {
	vlcmJSON(w, code, map[string]any{
		"error_type": kind,
		"messages":   []map[string]any{{"id": "com.vmware.esx.settings." + strings.ToLower(kind), "default_message": fmt.Sprintf(format, args...), "args": []string{}}},
	})
}

func (v *vlcmAPI) authenticated(r *http.Request) bool {
	req, _ := http.NewRequest(http.MethodGet, legacySessionPath, nil)
	req.Header = r.Header.Clone()
	req.URL.Scheme, req.URL.Host, req.Host = "https", r.Host, r.Host
	rec := httptest.NewRecorder()
	v.svc.ServeMux.ServeHTTP(rec, req)
	return rec.Code == http.StatusOK
}

func (v *vlcmAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !v.authenticated(r) {
		vlcmErr(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Authentication required.")
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, vlcmTasksPath) {
		id := strings.TrimPrefix(r.URL.Path, vlcmTasksPath)
		t, ok := v.tasks[id]
		if !ok || r.Method != http.MethodGet {
			vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "task %s not found", id)
			return
		}
		vlcmJSON(w, http.StatusOK, t.view())
		return
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, vlcmSettingsPath), "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "depots" && parts[1] == "offline":
		v.depotsAPI(w, r, parts[2:])
	case len(parts) >= 2 && parts[0] == "clusters":
		v.clusterAPI(w, r, parts[1], parts[2:])
	default:
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "no such resource %s", r.URL.Path)
	}
}

func (t *vlcmTask) view() map[string]any {
	out := map[string]any{"operation": t.Operation, "status": t.Status, "cancelable": false,
		"start_time": t.Start.UTC().Format(time.RFC3339), "user": "vcsim"}
	if t.Status == "SUCCEEDED" {
		out["result"] = t.Result
	}
	if t.Status == "FAILED" {
		out["error"] = map[string]any{"error_type": "ERROR", "messages": []map[string]any{{"id": "com.vmware.esx.settings.error", "default_message": t.Error, "args": []string{}}}}
	}
	if !t.End.IsZero() {
		out["end_time"] = t.End.UTC().Format(time.RFC3339)
	}
	return out
}

// newTask registers a task; run (if any) executes without v.mu held and returns (result, error).
func (v *vlcmAPI) newTask(op string, run func() (any, error)) string {
	v.seq++
	id := fmt.Sprintf("%d:com.vmware.esx.settings.%s", v.seq, op)
	t := &vlcmTask{Operation: op, Status: "RUNNING", Start: time.Now()}
	v.tasks[id] = t
	go func() {
		res, err := run()
		v.mu.Lock()
		defer v.mu.Unlock()
		t.End = time.Now()
		if err != nil {
			t.Status, t.Error = "FAILED", err.Error()
		} else {
			t.Status, t.Result = "SUCCEEDED", res
		}
	}()
	return id
}

func decodeBody(r *http.Request, into any) error {
	defer r.Body.Close()
	if err := json.NewDecoder(r.Body).Decode(into); err != nil {
		return fmt.Errorf("request body: %v", err)
	}
	return nil
}

// ---- depots ----------------------------------------------------------------------------

func depotContent(location string) map[string]string {
	out := map[string]string{}
	if m := vlcmBundleRE.FindStringSubmatch(path.Base(location)); m != nil {
		out[m[1]] = m[2]
	}
	return out
}

func (d *vlcmDepot) info() map[string]any {
	return map[string]any{"description": d.Description, "source_type": d.SourceType, "location": d.Location}
}

func (d *vlcmDepot) content() map[string]any {
	comps := map[string]any{}
	for name, ver := range d.Components {
		comps[name] = map[string]any{
			"display_name": "NVIDIA AI Enterprise vGPU driver for VMWare ESX-8.0.0", "vendor": "NVIDIA",
			"versions": []map[string]any{{"version": ver, "display_version": ver}},
		}
	}
	return map[string]any{"metadata_bundles": map[string]any{path.Base(d.Location): []map[string]any{{
		"display_name": path.Base(d.Location), "independent_components": comps,
	}}}}
}

func (v *vlcmAPI) depotsAPI(w http.ResponseWriter, r *http.Request, rest []string) {
	if len(rest) == 0 {
		switch r.Method {
		case http.MethodGet:
			out := map[string]any{}
			for id, d := range v.depots {
				out[id] = d.info()
			}
			vlcmJSON(w, http.StatusOK, out)
		case http.MethodPost:
			var spec struct {
				SourceType  string `json:"source_type"`
				Location    string `json:"location"`
				FileID      string `json:"file_id"`
				Description string `json:"description"`
			}
			if err := decodeBody(r, &spec); err != nil {
				vlcmErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "%v", err)
				return
			}
			if spec.SourceType != "PULL" || spec.Location == "" {
				vlcmErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "source_type PULL with a location is required (PUSH is not simulated)")
				return
			}
			for _, d := range v.depots {
				if d.Location == spec.Location {
					vlcmErr(w, http.StatusBadRequest, "ALREADY_EXISTS", "an offline depot at %s already exists", spec.Location)
					return
				}
			}
			v.seq++
			id := strconv.Itoa(v.seq)
			depot := &vlcmDepot{Location: spec.Location, Description: spec.Description, SourceType: spec.SourceType,
				Components: depotContent(spec.Location)}
			v.depots[id] = depot
			vlcmJSON(w, http.StatusOK, v.newTask("depots.offline.create", func() (any, error) {
				return map[string]any{"depot": id}, nil
			}))
		default:
			vlcmErr(w, http.StatusMethodNotAllowed, "OPERATION_NOT_FOUND", "method not allowed")
		}
		return
	}
	d, ok := v.depots[rest[0]]
	if !ok {
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "offline depot %s not found", rest[0])
		return
	}
	switch {
	case len(rest) == 1 && r.Method == http.MethodGet:
		vlcmJSON(w, http.StatusOK, d.info())
	case len(rest) == 1 && r.Method == http.MethodDelete:
		delete(v.depots, rest[0])
		vlcmJSON(w, http.StatusOK, v.newTask("depots.offline.delete", func() (any, error) { return nil, nil }))
	case len(rest) == 2 && rest[1] == "content" && r.Method == http.MethodGet:
		vlcmJSON(w, http.StatusOK, d.content())
	default:
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "no such resource %s", r.URL.Path)
	}
}

// depotHas reports whether an imported depot offers the component at the version.
func (v *vlcmAPI) depotHas(component, version string) bool {
	for _, d := range v.depots {
		if d.Components[component] == version {
			return true
		}
	}
	return false
}

// ---- clusters ----------------------------------------------------------------------------

func clusterName(moid string) (string, bool) {
	for name, ref := range sim.clusters {
		if ref.Value == moid {
			return name, true
		}
	}
	return "", false
}

// clusterHosts returns the GPU state of the cluster's hosts, sorted by name.
func clusterHosts(name string) []*gpuHost {
	var out []*gpuHost
	for _, g := range sim.hosts {
		if g.spec.Cluster == name {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].spec.Name < out[j].spec.Name })
	return out
}

// installedDriver reads a host's installed NVIDIA driver (the VIB on disk).
func installedDriver(g *gpuHost) string {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	return g.installed
}

// image returns the desired image of a vLCM-managed cluster, creating it from the hosts.
func (v *vlcmAPI) image(moid, name string) *vlcmImage {
	if img, ok := v.images[moid]; ok {
		return img
	}
	img := &vlcmImage{BaseImage: vlcmBaseImage, Components: map[string]string{}}
	counts := map[string]int{}
	for _, g := range clusterHosts(name) {
		if ver := installedDriver(g); ver != "" {
			counts[ver]++
		}
	}
	best, n := "", 0
	for ver, c := range counts {
		if c > n || (c == n && ver > best) {
			best, n = ver, c
		}
	}
	if best != "" {
		img.Components["NVD-AIE-800"] = best
	}
	v.images[moid] = img
	return img
}

func softwareView(img *vlcmImage) map[string]any {
	comps := map[string]any{}
	for name, ver := range img.Components {
		comps[name] = map[string]any{"version": ver, "details": map[string]any{
			"display_name": "NVIDIA AI Enterprise vGPU driver for VMWare ESX-8.0.0", "display_version": ver}}
	}
	return map[string]any{
		"base_image": map[string]any{"version": img.BaseImage, "details": map[string]any{
			"display_name": "ESXi", "display_version": vlcmBaseDisplay}},
		"components": comps, "solutions": map[string]any{}, "add_on": nil, "hardware_support": nil,
	}
}

func (v *vlcmAPI) clusterAPI(w http.ResponseWriter, r *http.Request, moid string, rest []string) {
	name, ok := clusterName(moid)
	if !ok {
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "cluster %s not found", moid)
		return
	}
	managed := clusterLifecycle[name] == "vlcm"
	if len(rest) == 2 && rest[0] == "enablement" && rest[1] == "software" && r.Method == http.MethodGet {
		vlcmJSON(w, http.StatusOK, map[string]any{"enabled": managed})
		return
	}
	if len(rest) == 0 || rest[0] != "software" {
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "no such resource %s", r.URL.Path)
		return
	}
	if !managed {
		vlcmErr(w, http.StatusBadRequest, "NOT_ALLOWED_IN_CURRENT_STATE",
			"cluster %s (%s) is not managed with a single image (it uses baselines)", name, moid)
		return
	}
	img := v.image(moid, name)
	rest = rest[1:]
	q := r.URL.Query()
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		vlcmJSON(w, http.StatusOK, softwareView(img))
	case len(rest) == 0 && r.Method == http.MethodPost && q.Get("action") == "apply":
		v.apply(w, r, moid, name)
	case len(rest) == 1 && rest[0] == "compliance" && r.Method == http.MethodGet:
		vlcmJSON(w, http.StatusOK, v.compliance(name, img))
	case len(rest) >= 1 && rest[0] == "drafts":
		v.draftsAPI(w, r, moid, img, rest[1:])
	default:
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "no such resource %s", r.URL.Path)
	}
}

func (v *vlcmAPI) draftsAPI(w http.ResponseWriter, r *http.Request, moid string, img *vlcmImage, rest []string) {
	if len(rest) == 0 {
		switch r.Method {
		case http.MethodGet:
			out := map[string]any{}
			for id, d := range v.drafts {
				if d.Cluster == moid {
					out[id] = map[string]any{"owner": "vcsim", "status": "VALID"}
				}
			}
			vlcmJSON(w, http.StatusOK, out)
		case http.MethodPost:
			v.seq++
			id := strconv.Itoa(v.seq)
			v.drafts[id] = &vlcmDraft{Cluster: moid, Image: img.copy()}
			vlcmJSON(w, http.StatusOK, id)
		default:
			vlcmErr(w, http.StatusMethodNotAllowed, "OPERATION_NOT_FOUND", "method not allowed")
		}
		return
	}
	d, ok := v.drafts[rest[0]]
	if !ok || d.Cluster != moid {
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "draft %s not found", rest[0])
		return
	}
	id := rest[0]
	rest = rest[1:]
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		vlcmJSON(w, http.StatusOK, map[string]any{"metadata": map[string]any{"owner": "vcsim", "status": "VALID"}, "software": softwareView(d.Image)})
	case len(rest) == 0 && r.Method == http.MethodDelete:
		delete(v.drafts, id)
		w.WriteHeader(http.StatusNoContent)
	case len(rest) == 0 && r.Method == http.MethodPost && r.URL.Query().Get("action") == "commit":
		delete(v.drafts, id)
		v.images[moid] = d.Image
		v.seq++
		commit := strconv.Itoa(v.seq)
		vlcmJSON(w, http.StatusOK, v.newTask("clusters.software.drafts.commit", func() (any, error) {
			return map[string]any{"commit": commit}, nil
		}))
	case len(rest) == 1 && rest[0] == "software" && r.Method == http.MethodGet:
		vlcmJSON(w, http.StatusOK, softwareView(d.Image))
	case len(rest) == 2 && rest[0] == "software" && rest[1] == "components" && r.Method == http.MethodPatch:
		var spec struct {
			ComponentsToSet    map[string]string `json:"components_to_set"`
			ComponentsToDelete []string          `json:"components_to_delete"`
		}
		if err := decodeBody(r, &spec); err != nil {
			vlcmErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "%v", err)
			return
		}
		for c, ver := range spec.ComponentsToSet {
			if !v.depotHas(c, ver) {
				vlcmErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "component %s version %s is not in any depot", c, ver)
				return
			}
		}
		for c, ver := range spec.ComponentsToSet {
			d.Image.Components[c] = ver
		}
		for _, c := range spec.ComponentsToDelete {
			delete(d.Image.Components, c)
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND", "no such resource %s", r.URL.Path)
	}
}

// ---- compliance and apply ------------------------------------------------------------------

func hostConnected(g *gpuHost) bool {
	host, ok := sim.reg.Get(g.ref).(*simulator.HostSystem)
	if !ok {
		return false
	}
	var state types.HostSystemConnectionState
	ctx := &simulator.Context{Context: context.Background(), Map: sim.reg}
	ctx.WithLock(host, func() { state = host.Runtime.ConnectionState })
	return state == types.HostSystemConnectionStateConnected
}

// hostCompliance is one host's compliance with the image and whether it needs remediation.
func hostCompliance(g *gpuHost, img *vlcmImage) (map[string]any, string) {
	installed := installedDriver(g)
	status := "COMPLIANT"
	comps := map[string]any{}
	for name, ver := range img.Components {
		if !strings.HasPrefix(name, "NVD-AIE-") {
			continue
		}
		cs := "COMPLIANT"
		if installed != ver {
			cs, status = "NON_COMPLIANT", "NON_COMPLIANT"
		}
		cur := any(nil)
		if installed != "" {
			cur = installed
		}
		comps[name] = map[string]any{"status": cs, "current_version": cur, "target_version": ver,
			"impact": map[bool]string{true: "NO_IMPACT", false: "MAINTENANCE_MODE_REQUIRED"}[cs == "COMPLIANT"]}
	}
	if !hostConnected(g) {
		status = "UNAVAILABLE"
	}
	return map[string]any{"status": status, "components": comps, "scan_time": vlcmTime(time.Now()),
		"base_image": map[string]any{"status": "COMPLIANT", "current_version": img.BaseImage, "target_version": img.BaseImage}}, status
}

func (v *vlcmAPI) compliance(name string, img *vlcmImage) map[string]any {
	hosts := map[string]any{}
	lists := map[string][]string{"COMPLIANT": {}, "NON_COMPLIANT": {}, "UNAVAILABLE": {}}
	for _, g := range clusterHosts(name) {
		view, status := hostCompliance(g, img)
		hosts[g.ref.Value] = view
		lists[status] = append(lists[status], g.ref.Value)
	}
	overall := "COMPLIANT"
	if len(lists["NON_COMPLIANT"]) > 0 {
		overall = "NON_COMPLIANT"
	} else if len(lists["UNAVAILABLE"]) > 0 {
		overall = "UNAVAILABLE"
	}
	return map[string]any{"status": overall, "hosts": hosts, "compliant_hosts": lists["COMPLIANT"],
		"non_compliant_hosts": lists["NON_COMPLIANT"], "unavailable_hosts": lists["UNAVAILABLE"],
		"incompatible_hosts": []string{}, "scan_time": vlcmTime(time.Now())}
}

// vlcmTime is a date-time as the vSphere Automation API writes it (UTC, milliseconds).
func vlcmTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (v *vlcmAPI) apply(w http.ResponseWriter, r *http.Request, moid, name string) {
	if v.applying[moid] {
		vlcmErr(w, http.StatusBadRequest, "NOT_ALLOWED_IN_CURRENT_STATE", "a remediation of cluster %s is running", name)
		return
	}
	img := v.image(moid, name).copy()
	v.applying[moid] = true
	vlcmJSON(w, http.StatusOK, v.newTask("clusters.software.apply", func() (any, error) {
		defer func() {
			v.mu.Lock()
			delete(v.applying, moid)
			v.mu.Unlock()
		}()
		var done []string
		for _, g := range clusterHosts(name) {
			if _, status := hostCompliance(g, img); status != "NON_COMPLIANT" {
				continue
			}
			if err := remediateHost(g, img); err != nil {
				before := "none"
				if len(done) > 0 {
					before = strings.Join(done, ", ")
				}
				return nil, fmt.Errorf("remediation of cluster %s failed on host %s: %v (hosts remediated before: %s)",
					name, g.spec.Name, err, before)
			}
			done = append(done, g.spec.Name)
		}
		return map[string]any{"status": "SUCCESS", "hosts": done}, nil
	}))
}

// waitSoapTask waits for a vim task started by one of the simulator's methods.
func waitSoapTask(ctx *simulator.Context, ref types.ManagedObjectReference) error {
	task, ok := ctx.Map.Get(ref).(*simulator.Task)
	if !ok {
		return fmt.Errorf("task %s vanished", ref.Value)
	}
	task.Wait()
	var err error
	ctx.Map.WithLock(&simulator.Context{}, task, func() {
		if task.Info.State == types.TaskInfoStateError && task.Info.Error != nil {
			err = fmt.Errorf("%s", faultMessage(task.Info.Error.Fault))
		}
	})
	return err
}

// remediateHost: maintenance mode, install the image's NVIDIA component, reboot, exit.
func remediateHost(g *gpuHost, img *vlcmImage) error {
	ctx := &simulator.Context{Context: context.Background(), Map: sim.reg}
	host := sim.reg.Get(g.ref).(*simulator.HostSystem)
	var wasInMM bool
	ctx.WithLock(host, func() { wasInMM = host.Runtime.InMaintenanceMode })
	ops := &hostOps{Self: types.ManagedObjectReference{Type: "GpupoolOps", Value: "vlcm-" + g.ref.Value}, host: host}
	if !wasInMM {
		res := ops.EnterMaintenanceModeTask(ctx, &types.EnterMaintenanceMode_Task{This: g.ref})
		if err := waitSoapTask(ctx, res.(*methods.EnterMaintenanceMode_TaskBody).Res.Returnval); err != nil {
			return fmt.Errorf("the host cannot enter maintenance mode: %v", err)
		}
	}
	var urls []string
	for comp, ver := range img.Components {
		if strings.HasPrefix(comp, "NVD-AIE-") {
			urls = append(urls, fmt.Sprintf("vlcm-image/%s_%s_1.zip", comp, ver))
		}
	}
	if len(urls) > 0 {
		res := g.patchMgr.InstallHostPatchV2Task(ctx, &types.InstallHostPatchV2_Task{This: g.patchMgr.Self, BundleUrls: urls})
		if err := waitSoapTask(ctx, res.(*methods.InstallHostPatchV2_TaskBody).Res.Returnval); err != nil {
			return fmt.Errorf("install failed, the host is left in maintenance mode: %v", err)
		}
	}
	sim.mu.Lock()
	before := g.rebootCount
	sim.mu.Unlock()
	res := ops.RebootHostTask(ctx, &types.RebootHost_Task{This: g.ref})
	if err := waitSoapTask(ctx, res.(*methods.RebootHost_TaskBody).Res.Returnval); err != nil {
		return fmt.Errorf("reboot failed, the host is left in maintenance mode: %v", err)
	}
	deadline := time.Now().Add(sim.rebootDelay + 60*time.Second)
	for {
		sim.mu.Lock()
		back := g.rebootCount > before
		sim.mu.Unlock()
		if back && hostConnected(g) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the host did not come back from its reboot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !wasInMM {
		res := ops.ExitMaintenanceModeTask(ctx, &types.ExitMaintenanceMode_Task{This: g.ref})
		if err := waitSoapTask(ctx, res.(*methods.ExitMaintenanceMode_TaskBody).Res.Returnval); err != nil {
			return fmt.Errorf("the host did not exit maintenance mode: %v", err)
		}
	}
	return nil
}
