package main

// The per-device mode of a host's NVIDIA GPUs through the vSphere 9.1 Automation API,
// com.vmware.vcenter.host.hardware.direct_path_devices (VMware's vmware-vcenter 9.1.1.0
// bindings, class DirectPathDevices, "added in vSphere API 9.1.0.0"):
//
//   - GET  /api/vcenter/host/{host}/hardware/direct-path-devices[?page_size=N&marker=M&vm_class=true]
//     answers ListResult{items[{device, info}]}: one item per GPU (device: its PCI id), Info
//     {name, current_mode, configurable_modes, driver_name, driver_version, memory_info, vms,
//     vm_classes_info (with vm_class=true: empty, no VM class reservations are modelled)}.
//   - POST /api/vcenter/host/{host}/hardware/direct-path-devices?action=configure&vmw-task=true
//     with ConfigureSpec{device, new_mode} answers a task id; GET /api/cis/tasks/{task} gives
//     the task, whose result is ConfigureResult{configure_impacts}.
//
// Both read and write the per-GPU record the SOAP side uses (gpu.go, placement.go): the
// configured vGPU mode (sameSize / mixedSize) of each GPU and the VMs placed on it, so a mode
// set here reads back in config.graphicsInfo[].vgpuMode and graphicsConfig.deviceType[].vgpuMode,
// and a mode UpdateGraphicsConfig set reads back here. The rules (README.md, "vGPU mode per
// device over REST"):
//
//   - served only when the simulator presents API 9.1 or later; older releases answer 404
//     NOT_FOUND, as a vCenter without the service does;
//   - current_mode: VGPU_SAME_SIZE or VGPU_MIXED_SIZE (the configured vGPU mode, also while the
//     GPU runs MIG) for a GPU of graphics type sharedDirect, HOST for one of type shared;
//     configurable_modes: both vGPU modes while an NVIDIA driver is loaded, none without;
//   - configure refuses (400 INVALID_ARGUMENT, before the task starts) a mode outside the
//     enumeration, a mode not in the device's configurable_modes, a device the host lacks, and
//     (the task fails, nothing changed) a mode change of a GPU that carries a powered-on vGPU VM:
//     the same predicate (gpuHost.busy) as UpdateGraphicsConfig's refusal;
//   - configure_impacts: [NONE] for a change it makes (the GPU is idle, so the new mode applies
//     at once) and for a configure to the mode the device already has.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

const (
	directPathService = "com.vmware.vcenter.host.hardware.direct_path_devices"
	directPathPattern = "/api/vcenter/host/{host}/hardware/direct-path-devices"
	directPathTasks   = "/api/cis/tasks/"
	// ListResult's default page (IterationSpec.page_size: "If None, then defaults to 256")
	directPathPageSize = 256
)

// DirectPathDevices.DirectPathDeviceMode and ConfigureImpact (the 9.1.1.0 bindings).
var directPathModes = map[string]bool{
	"NONE": true, "HOST": true, "DIRECTPATH": true, "ENHANCED_DIRECTPATH": true,
	"VGPU_SAME_SIZE": true, "VGPU_MIXED_SIZE": true, "SYSTEM_SELECT": true,
}

// restVgpuModes maps the REST vGPU modes to the simulator's per-GPU record (the SOAP words).
var restVgpuModes = map[string]string{"VGPU_SAME_SIZE": vgpuSameSize, "VGPU_MIXED_SIZE": vgpuMixedSize}

type directPathTask struct {
	Status  string
	Start   time.Time
	End     time.Time
	Impacts []string
	Error   string
}

type directPathAPI struct {
	svc   *simulator.Service
	reg   *simulator.Registry
	mu    sync.Mutex
	seq   int
	tasks map[string]*directPathTask
	// the handler of the task ids of other services (vlcm.go's)
	others http.Handler
}

func init() {
	simulator.RegisterEndpoint(func(s *simulator.Service, r *simulator.Registry) {
		if !r.IsVPX() {
			return
		}
		d := &directPathAPI{svc: s, reg: r, tasks: map[string]*directPathTask{}}
		s.ServeMux.Handle(directPathPattern, d)
		// more specific than vlcm.go's /api/cis/tasks/ subtree: our task ids are answered here,
		// the others are handed to the handler registered for that subtree
		s.ServeMux.HandleFunc("GET "+directPathTasks+"{task}", d.task)
	})
}

// apiAtLeast91 reports whether the presented release is vSphere 9.1 or later.
func apiAtLeast91() bool {
	parts := strings.SplitN(presented.API, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return major > 9 || (major == 9 && minor >= 1)
}

func (d *directPathAPI) authenticated(r *http.Request) bool {
	req, _ := http.NewRequest(http.MethodGet, legacySessionPath, nil)
	req.Header = r.Header.Clone()
	req.URL.Scheme, req.URL.Host, req.Host = "https", r.Host, r.Host
	rec := httptest.NewRecorder()
	d.svc.ServeMux.ServeHTTP(rec, req)
	return rec.Code == http.StatusOK
}

func directPathError(w http.ResponseWriter, code int, kind, format string, args ...any) {
	writeJSON(w, code, map[string]any{
		"error_type": kind,
		"messages":   []map[string]any{localizable(directPathService+"."+strings.ToLower(kind), fmt.Sprintf(format, args...))},
	})
}

func (d *directPathAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !d.authenticated(r) {
		directPathError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Authentication required.")
		return
	}
	if !apiAtLeast91() {
		directPathError(w, http.StatusNotFound, "NOT_FOUND", "no service %s at vSphere API %s", directPathService, presented.API)
		return
	}
	g := sim.hostOf(types.ManagedObjectReference{Type: "HostSystem", Value: r.PathValue("host")})
	if g == nil {
		directPathError(w, http.StatusNotFound, "NOT_FOUND", "host %s not found", r.PathValue("host"))
		return
	}
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && q.Get("action") == "":
		d.list(w, q, g)
	case r.Method == http.MethodPost && q.Get("action") == "configure":
		if q.Get("vmw-task") != "true" {
			directPathError(w, http.StatusNotFound, "NOT_FOUND", "configure is offered only as a task (vmw-task=true)")
			return
		}
		d.configure(w, r, g)
	default:
		directPathError(w, http.StatusNotFound, "NOT_FOUND", "no operation %s %s", r.Method, r.URL.RequestURI())
	}
}

// deviceInfo is DirectPathDevices.Info of GPU i (call with sim.mu held).
func (d *directPathAPI) deviceInfo(g *gpuHost, i int, vms []types.ManagedObjectReference, withClasses bool) map[string]any {
	g.ensureGPUState()
	id := pciID(gpuBus(i))
	mode := "HOST"
	if g.deviceGraphicsType(id) == "sharedDirect" {
		mode = "VGPU_SAME_SIZE"
		if g.vgpuMode[i] == vgpuMixedSize {
			mode = "VGPU_MIXED_SIZE"
		}
	}
	configurable := []string{}
	if g.running != "" {
		configurable = []string{"VGPU_SAME_SIZE", "VGPU_MIXED_SIZE"}
	}
	ids := []string{}
	for _, vm := range vms {
		ids = append(ids, vm.Value)
	}
	total := int64(g.spec.Model.MemoryGB) * 1024
	var used int64
	for _, v := range g.placed[i] {
		used += int64(v.Profile.FbGB) * 1024
	}
	info := map[string]any{
		"name": g.spec.Model.DisplayName, "current_mode": mode, "configurable_modes": configurable,
		"interconnect_type": "PCIe",
		"memory_info":       map[string]any{"used_memory": used, "total_memory": total},
		"vms":               ids,
	}
	if g.running != "" {
		info["driver_name"], info["driver_version"] = "nvidia", g.running
	}
	if withClasses {
		info["vm_classes_info"] = []any{}
	}
	return info
}

// list serves DirectPathDevices.list: the GPUs in PCI id order, page_size of them after marker
// (the device id the previous page ended with: the simulator's reading of the opaque marker).
func (d *directPathAPI) list(w http.ResponseWriter, q map[string][]string, g *gpuHost) {
	size := directPathPageSize
	if v := first(q["page_size"]); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			directPathError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "page_size %q is not a positive integer", v)
			return
		}
		size = n
	}
	marker := first(q["marker"])
	withClasses := first(q["vm_class"]) == "true"
	items := []map[string]any{}
	sim.mu.Lock()
	if g.spec.Model != nil {
		vms := g.vmsByGPU()
		ids := g.gpuPciIDs()
		order := make([]int, len(ids))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool { return ids[order[a]] < ids[order[b]] })
		for _, i := range order {
			if marker != "" && ids[i] <= marker {
				continue
			}
			if len(items) == size {
				break
			}
			items = append(items, map[string]any{"device": ids[i], "info": d.deviceInfo(g, i, vms[i], withClasses)})
		}
	}
	sim.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// configure serves DirectPathDevices.configure$task.
func (d *directPathAPI) configure(w http.ResponseWriter, r *http.Request, g *gpuHost) {
	var spec struct {
		Device  string  `json:"device"`
		NewMode *string `json:"new_mode"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		directPathError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "ConfigureSpec: %v", err)
		return
	}
	sim.mu.Lock()
	g.ensureGPUState()
	index := -1
	for i, id := range g.gpuPciIDs() {
		if id == spec.Device {
			index = i
		}
	}
	fail := func(code int, kind, format string, args ...any) {
		sim.mu.Unlock()
		directPathError(w, code, kind, format, args...)
	}
	if index < 0 {
		fail(http.StatusNotFound, "NOT_FOUND", "host %s has no DirectPath device %q", g.spec.Name, spec.Device)
		return
	}
	var want string
	if spec.NewMode != nil {
		mode := *spec.NewMode
		if !directPathModes[mode] {
			fail(http.StatusBadRequest, "INVALID_ARGUMENT", "%q is not a DirectPathDeviceMode", mode)
			return
		}
		info := d.deviceInfo(g, index, nil, false)
		ok := false
		for _, m := range info["configurable_modes"].([]string) {
			ok = ok || m == mode
		}
		if !ok && mode != info["current_mode"] {
			fail(http.StatusBadRequest, "INVALID_ARGUMENT", "device %s of host %s cannot be configured to %s (configurable modes: %s)",
				spec.Device, g.spec.Name, mode, strings.Join(info["configurable_modes"].([]string), ", "))
			return
		}
		want = restVgpuModes[mode]
	}
	var refusal string
	if want != "" && want != g.vgpuMode[index] && g.busy(index) {
		var names []string
		for _, v := range g.placed[index] {
			names = append(names, v.Name)
		}
		refusal = fmt.Sprintf("cannot change the vGPU mode of GPU %s on host %s to %s while powered-on VMs use it: %s",
			spec.Device, g.spec.Name, want, strings.Join(names, ", "))
	} else if want != "" {
		g.vgpuMode[index] = want
	}
	sim.mu.Unlock()
	sim.render(&simulator.Context{Context: context.Background(), Map: d.reg}, g)

	d.mu.Lock()
	d.seq++
	id := fmt.Sprintf("%d:%s", d.seq, directPathService)
	t := &directPathTask{Status: "SUCCEEDED", Start: time.Now(), End: time.Now(), Impacts: []string{"NONE"}}
	if refusal != "" {
		t.Status, t.Impacts, t.Error = "FAILED", nil, refusal
	}
	d.tasks[id] = t
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, id)
}

// task serves GET /api/cis/tasks/{task} for the configure tasks; other ids go to the handler
// of the /api/cis/tasks/ subtree (vlcm.go).
func (d *directPathAPI) task(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("task")
	d.mu.Lock()
	t, ok := d.tasks[id]
	d.mu.Unlock()
	if !ok {
		d.mu.Lock()
		if d.others == nil {
			// a POST to the same path is not ours: the mux names the subtree's handler
			probe, _ := http.NewRequest(http.MethodPost, r.URL.Path, nil)
			d.others, _ = d.svc.ServeMux.Handler(probe)
		}
		others := d.others
		d.mu.Unlock()
		others.ServeHTTP(w, r)
		return
	}
	if !d.authenticated(r) {
		directPathError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Authentication required.")
		return
	}
	op := "configure"
	out := map[string]any{
		"description": localizable(directPathService+"."+op, directPathService+" "+op),
		"service":     directPathService, "operation": op, "status": t.Status, "cancelable": false,
		"start_time": vlcmTime(t.Start), "end_time": vlcmTime(t.End), "user": "vcsim",
		"progress": map[string]any{"total": 1, "completed": 1,
			"message": localizable(directPathService+".progress", strings.ToLower(t.Status))},
	}
	if t.Status == "SUCCEEDED" {
		out["result"] = map[string]any{"configure_impacts": t.Impacts}
	} else {
		out["error"] = map[string]any{"error_type": "ERROR", "messages": []map[string]any{localizable(directPathService+".device_in_use", t.Error)}}
	}
	writeJSON(w, http.StatusOK, out)
}
