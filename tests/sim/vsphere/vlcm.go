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
//   404 NOT_FOUND (no desired software document) on the image endpoints.
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
	// the release date of ESXi 8.0 U3 (build 24022510)
	vlcmBaseReleased    = "2024-06-25T00:00:00.000Z"
	nvidiaComponentName = "NVIDIA AI Enterprise vGPU driver for VMWare ESX-8.0.0"
)

// clusterLifecycle holds the fleet's `lifecycle` per cluster name (set by fleet.expand).
var clusterLifecycle = map[string]string{}

var vlcmBundleRE = regexp.MustCompile(`^(NVD-AIE-[0-9]+)_(.+)_([0-9]+)\.zip$`)

type vlcmDepot struct {
	Location    string
	Description string
	SourceType  string
	Components  map[string]string // component -> version
	Created     time.Time
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
	Created time.Time
}

// metadata is the draft's com.vmware.esx.settings.clusters.software.Drafts.Metadata.
func (d *vlcmDraft) metadata() map[string]any {
	return map[string]any{"owner": "vcsim", "status": "VALID", "creation_time": vlcmTime(d.Created)}
}

type vlcmTask struct {
	Service   string // the vAPI service id, e.g. com.vmware.esx.settings.depots.offline
	Operation string // the operation of that service, e.g. create
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

// localizable is a com.vmware.vapi.std.LocalizableMessage.
func localizable(id, text string) map[string]any {
	return map[string]any{"id": id, "default_message": text, "args": []string{}}
}

// view is the task's com.vmware.cis.task.Info with its result (GET /api/cis/tasks/{task}):
// description, service, operation, status, cancelable, progress while running and after,
// start_time, end_time once done, the operation's result on success, its error on failure.
func (t *vlcmTask) view() map[string]any {
	done := 0
	if t.Status != "RUNNING" {
		done = 1
	}
	out := map[string]any{
		"description": localizable(t.Service+"."+t.Operation, t.Service+" "+t.Operation),
		"service":     t.Service, "operation": t.Operation, "status": t.Status, "cancelable": false,
		"start_time": vlcmTime(t.Start), "user": "vcsim",
		"progress": map[string]any{"total": 1, "completed": done,
			"message": localizable(t.Service+"."+t.Operation+".progress", strings.ToLower(t.Status))},
	}
	if t.Status == "SUCCEEDED" && t.Result != nil {
		out["result"] = t.Result
	}
	if t.Status == "FAILED" {
		out["error"] = map[string]any{"error_type": "ERROR", "messages": []map[string]any{localizable("com.vmware.esx.settings.error", t.Error)}}
	}
	if !t.End.IsZero() {
		out["end_time"] = vlcmTime(t.End)
	}
	return out
}

// newTask registers a task of an operation of a service (their vAPI ids); run executes
// without v.mu held and returns (result, error); the result has the operation's result type.
func (v *vlcmAPI) newTask(service, op string, run func() (any, error)) string {
	v.seq++
	id := fmt.Sprintf("%d:%s", v.seq, service)
	t := &vlcmTask{Service: service, Operation: op, Status: "RUNNING", Start: time.Now()}
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

// summary is the depot as the list gives it (Offline.Summary), info as GET gives it (Offline.Info).
func (d *vlcmDepot) summary() map[string]any {
	return map[string]any{"description": d.Description, "source_type": d.SourceType, "location": d.Location, "owner": "vcsim"}
}

func (d *vlcmDepot) info() map[string]any {
	out := d.summary()
	out["create_time"] = vlcmTime(d.Created)
	return out
}

// content is the depot's com.vmware.esx.settings.depots.offline.content.Info: per metadata
// bundle a MetadataInfo (file_name, independent_components as ComponentSummary: display_name,
// versions).
func (d *vlcmDepot) content() map[string]any {
	comps := map[string]any{}
	for name, ver := range d.Components {
		comps[name] = map[string]any{
			"display_name": nvidiaComponentName,
			"versions":     []map[string]any{{"version": ver, "display_version": ver}},
		}
	}
	return map[string]any{"metadata_bundles": map[string]any{path.Base(d.Location): []map[string]any{{
		"file_name": path.Base(d.Location), "independent_components": comps,
	}}}}
}

func (v *vlcmAPI) depotsAPI(w http.ResponseWriter, r *http.Request, rest []string) {
	if len(rest) == 0 {
		switch r.Method {
		case http.MethodGet:
			out := map[string]any{}
			for id, d := range v.depots {
				out[id] = d.summary()
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
				Components: depotContent(spec.Location), Created: time.Now()}
			v.depots[id] = depot
			vlcmJSON(w, http.StatusOK, v.newTask("com.vmware.esx.settings.depots.offline", "create", func() (any, error) {
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
		vlcmJSON(w, http.StatusOK, v.newTask("com.vmware.esx.settings.depots.offline", "delete", func() (any, error) { return nil, nil }))
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

// componentInfo is a com.vmware.esx.settings.ComponentInfo of a component at a version.
func componentInfo(ver string) map[string]any {
	return map[string]any{"version": ver, "details": map[string]any{
		"display_name": nvidiaComponentName, "vendor": "NVIDIA", "display_version": ver}}
}

// baseImageInfo is a com.vmware.esx.settings.BaseImageInfo.
func baseImageInfo(ver string) map[string]any {
	return map[string]any{"version": ver, "details": map[string]any{
		"display_name": "ESXi", "display_version": vlcmBaseDisplay, "release_date": vlcmBaseReleased}}
}

// softwareView is the image as com.vmware.esx.settings.SoftwareInfo.
func softwareView(img *vlcmImage) map[string]any {
	comps := map[string]any{}
	for name, ver := range img.Components {
		comps[name] = componentInfo(ver)
	}
	return map[string]any{
		"base_image": baseImageInfo(img.BaseImage),
		"components": comps, "solutions": map[string]any{},
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
		// the image operations declare no NOT_ALLOWED_IN_CURRENT_STATE for this (software.get,
		// compliance.get, drafts.create do not raise it): a cluster without a desired software
		// document is NOT_FOUND, as the API documents for these operations
		vlcmErr(w, http.StatusNotFound, "NOT_FOUND",
			"cluster %s (%s) has no desired software: it is not managed with a single image (it uses baselines)", name, moid)
		return
	}
	img := v.image(moid, name)
	rest = rest[1:]
	q := r.URL.Query()
	if r.Method != http.MethodGet {
		// Lifecycle Manager image privileges (README.md, "Accounts and privileges"): editing the
		// desired image needs Image Write, remediating the cluster's hosts Image Remediation Write
		privilege := "VcIntegrity.lifecycleSoftwareSpecification.Write"
		if len(rest) == 0 && q.Get("action") == "apply" {
			privilege = "VcIntegrity.lifecycleSoftwareRemediation.Write"
		}
		if restRefusal(w, r, sim.reg, types.ManagedObjectReference{Type: "ClusterComputeResource", Value: moid}, privilege) {
			return
		}
	}
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
					out[id] = map[string]any{"metadata": d.metadata()}
				}
			}
			vlcmJSON(w, http.StatusOK, out)
		case http.MethodPost:
			v.seq++
			id := strconv.Itoa(v.seq)
			v.drafts[id] = &vlcmDraft{Cluster: moid, Image: img.copy(), Created: time.Now()}
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
		vlcmJSON(w, http.StatusOK, map[string]any{"metadata": d.metadata(), "software": softwareView(d.Image)})
	case len(rest) == 0 && r.Method == http.MethodDelete:
		delete(v.drafts, id)
		w.WriteHeader(http.StatusNoContent)
	case len(rest) == 0 && r.Method == http.MethodPost && r.URL.Query().Get("action") == "commit":
		delete(v.drafts, id)
		v.images[moid] = d.Image
		v.seq++
		commit := strconv.Itoa(v.seq)
		// the commit operation's result is the commit id
		vlcmJSON(w, http.StatusOK, v.newTask("com.vmware.esx.settings.clusters.software.drafts", "commit", func() (any, error) {
			return commit, nil
		}))
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

// hostCompliance is one host's com.vmware.esx.settings.HostCompliance with the image and its
// status. A component's compliance gives the installed (current) and the image's (target)
// ComponentInfo; the impact of remediating is the host's: installing the NVIDIA driver needs
// maintenance mode and a reboot (REBOOT_REQUIRED), none when compliant.
func hostCompliance(g *gpuHost, img *vlcmImage) (map[string]any, string) {
	installed := installedDriver(g)
	status := "COMPLIANT"
	comps := map[string]any{}
	for name, ver := range img.Components {
		if !strings.HasPrefix(name, "NVD-AIE-") {
			continue
		}
		comp := map[string]any{"status": "COMPLIANT", "target": componentInfo(ver), "target_source": "USER",
			"notifications": map[string]any{}}
		if installed != ver {
			comp["status"], status = "NON_COMPLIANT", "NON_COMPLIANT"
		}
		if installed != "" {
			comp["current"], comp["current_source"] = componentInfo(installed), "USER"
		}
		comps[name] = comp
	}
	impact := "NO_IMPACT"
	if status == "NON_COMPLIANT" {
		impact = "REBOOT_REQUIRED"
	}
	if !hostConnected(g) {
		status, impact = "UNAVAILABLE", "UNKNOWN"
	}
	return map[string]any{"status": status, "impact": impact, "components": comps, "solutions": map[string]any{},
		"notifications": map[string]any{}, "scan_time": vlcmTime(time.Now()),
		"base_image": map[string]any{"status": "COMPLIANT", "current": baseImageInfo(img.BaseImage),
			"target": baseImageInfo(img.BaseImage), "notifications": map[string]any{}},
		"add_on": map[string]any{"status": "COMPLIANT", "notifications": map[string]any{}}}, status
}

// impactRank orders com.vmware.esx.settings.ComplianceImpact values; a cluster has its worst host's.
var impactRank = map[string]int{"NO_IMPACT": 0, "UNKNOWN": 1, "REBOOT_REQUIRED": 2}

// compliance is the cluster's com.vmware.esx.settings.ClusterCompliance.
func (v *vlcmAPI) compliance(name string, img *vlcmImage) map[string]any {
	hosts := map[string]any{}
	info := map[string]any{}
	lists := map[string][]string{"COMPLIANT": {}, "NON_COMPLIANT": {}, "UNAVAILABLE": {}}
	impact := "NO_IMPACT"
	for _, g := range clusterHosts(name) {
		view, status := hostCompliance(g, img)
		hosts[g.ref.Value] = view
		info[g.ref.Value] = map[string]any{"name": g.spec.Name}
		lists[status] = append(lists[status], g.ref.Value)
		if h := view["impact"].(string); impactRank[h] > impactRank[impact] {
			impact = h
		}
	}
	overall := "COMPLIANT"
	if len(lists["NON_COMPLIANT"]) > 0 {
		overall = "NON_COMPLIANT"
	} else if len(lists["UNAVAILABLE"]) > 0 {
		overall = "UNAVAILABLE"
	}
	return map[string]any{"status": overall, "impact": impact, "notifications": map[string]any{},
		"hosts": hosts, "host_info": info, "compliant_hosts": lists["COMPLIANT"],
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
	// ApplySpec: accept_eula, and hosts (optional): only these hosts are remediated
	var spec struct {
		Hosts []string `json:"hosts"`
	}
	if r.Body != nil {
		_ = json.NewDecoder(r.Body).Decode(&spec)
	}
	only := map[string]bool{}
	for _, h := range spec.Hosts {
		only[h] = true
	}
	img := v.image(moid, name).copy()
	v.applying[moid] = true
	v.seq++
	commit := strconv.Itoa(v.seq) // the commit the apply brings the hosts to
	vlcmJSON(w, http.StatusOK, v.newTask("com.vmware.esx.settings.clusters.software", "apply", func() (any, error) {
		defer func() {
			v.mu.Lock()
			delete(v.applying, moid)
			v.mu.Unlock()
		}()
		started := time.Now()
		var done []string
		result := map[string]any{"commit": commit, "host_info": map[string]any{}, "host_status": map[string]any{},
			"successful_hosts": []string{}, "failed_hosts": []string{}, "skipped_hosts": []string{}}
		for _, g := range clusterHosts(name) {
			result["host_info"].(map[string]any)[g.ref.Value] = map[string]any{"name": g.spec.Name}
			hostStart := time.Now()
			if _, status := hostCompliance(g, img); status != "NON_COMPLIANT" || (len(only) > 0 && !only[g.ref.Value]) {
				result["host_status"].(map[string]any)[g.ref.Value] = applyStatus("SKIPPED", hostStart)
				result["skipped_hosts"] = append(result["skipped_hosts"].([]string), g.ref.Value)
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
			result["host_status"].(map[string]any)[g.ref.Value] = applyStatus("OK", hostStart)
			result["successful_hosts"] = append(result["successful_hosts"].([]string), g.ref.Value)
		}
		result["status"] = applyStatus("OK", started)
		return result, nil
	}))
}

// applyStatus is a com.vmware.esx.settings.clusters.software.ApplyStatus that ends now.
func applyStatus(status string, start time.Time) map[string]any {
	return map[string]any{"status": status, "start_time": vlcmTime(start), "end_time": vlcmTime(time.Now()),
		"notifications": map[string]any{}}
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
