# Kubernetes test rig: a real control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler), kwok GPU nodes, helm and Kueue, all built from pinned Go modules.
# See tests/sim/k8s/README.md.
K8S_SIM := tests/sim/k8s
K8S_BIN := $(SIM_DIR)/bin
K8S_SHARE := $(SIM_DIR)/k8s-share

.PHONY: k8s-build k8s-up k8s-down
sim-build: k8s-build

k8s-build:
	$(K8S_SIM)/build.sh $(K8S_BIN) $(K8S_SHARE)

k8s-up: k8s-build venv
	$(PY) tests/sim/k8s_rig.py up

k8s-down:
	@if [ -x $(PY) ]; then $(PY) tests/sim/k8s_rig.py down; fi
