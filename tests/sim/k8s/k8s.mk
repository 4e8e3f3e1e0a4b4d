# Kubernetes test rig: a real control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler), kwok GPU nodes, helm and Kueue, all built from pinned Go modules, and
# for metrics Prometheus, kube-state-metrics and a DCGM exporter double.
# See tests/sim/k8s/README.md.
#   make k8s-up K8S_METRICS=1 [K8S_DCGM_WORKLOAD=file]   # with Prometheus scraping the rig
K8S_SIM := tests/sim/k8s
K8S_BIN := $(SIM_DIR)/bin
K8S_SHARE := $(SIM_DIR)/k8s-share
K8S_METRICS ?=
K8S_DCGM_WORKLOAD ?=
K8S_UP_ARGS := $(if $(filter-out 0,$(K8S_METRICS)),--metrics) $(if $(K8S_DCGM_WORKLOAD),--dcgm-workload $(K8S_DCGM_WORKLOAD))

.PHONY: k8s-build k8s-up k8s-down
sim-build: k8s-build

k8s-build:
	$(K8S_SIM)/build.sh $(K8S_BIN) $(K8S_SHARE)

k8s-up: k8s-build venv
	$(PY) tests/sim/k8s_rig.py up $(K8S_UP_ARGS)

k8s-down:
	@if [ -x $(PY) ]; then $(PY) tests/sim/k8s_rig.py down; fi
