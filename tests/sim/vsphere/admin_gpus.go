package main

// POST /_sim/hosts/<name>/gpus/<index>: a GPU's MIG mode and vGPU mode
// changed behind the collection's back (drift tests).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/vmware/govmomi/simulator"
)

// setGPUAdmin serves {"mig": true|false, "vgpu_mode": "sameSize"|"mixedSize"}
// (either or both): MIG mode current and pending both change, as after
// nvidia-smi and a GPU reset. 409 while a powered-on VM's vGPU sits on the GPU.
func setGPUAdmin(w http.ResponseWriter, r *http.Request, ctx *simulator.Context, g *gpuHost, index string) {
	var req struct {
		MIG      *bool   `json:"mig"`
		VgpuMode *string `json:"vgpu_mode"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	i, err := strconv.Atoi(index)
	sim.mu.Lock()
	g.ensureGPUState()
	fail := func(code int, format string, args ...any) {
		sim.mu.Unlock()
		writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, args...)})
	}
	switch {
	case err != nil || i < 0 || i >= g.spec.GPUCount:
		fail(http.StatusNotFound, "host %s has no GPU %s (it has %d)", g.spec.Name, index, g.spec.GPUCount)
		return
	case req.MIG != nil && *req.MIG && !migSupported(g):
		fail(http.StatusBadRequest, "the GPUs of host %s have no MIG mode", g.spec.Name)
		return
	case req.VgpuMode != nil && *req.VgpuMode != vgpuSameSize && *req.VgpuMode != vgpuMixedSize:
		fail(http.StatusBadRequest, "vgpu_mode must be %s or %s", vgpuSameSize, vgpuMixedSize)
		return
	case g.busy(i):
		var names []string
		for _, v := range g.placed[i] {
			names = append(names, v.Name)
		}
		fail(http.StatusConflict, "GPU %d of host %s carries powered-on vGPU VMs: %v", i, g.spec.Name, names)
		return
	}
	if req.MIG != nil {
		g.mig[i] = gpuMig{Current: *req.MIG, Pending: *req.MIG}
	}
	if req.VgpuMode != nil {
		g.vgpuMode[i] = *req.VgpuMode
	}
	sim.mu.Unlock()
	sim.render(ctx, g)
	writeJSON(w, http.StatusOK, hostView(ctx, g))
}
