# vSphere simulator rules (included by the top Makefile).
VSPHERE_SIM_SRC := tests/sim/vsphere
VSPHERE_SIM_BIN := $(SIM_DIR)/bin/vspheresim
VSPHERE_SIM_DEPS := $(wildcard $(VSPHERE_SIM_SRC)/*.go) $(VSPHERE_SIM_SRC)/go.mod $(VSPHERE_SIM_SRC)/go.sum
FLEET ?= examples/fleet.yml
SIM_PORT ?= 0
SIM_REBOOT_SECONDS ?= 1
# vSphere API the simulator presents (8.0.3 or 9.0); empty: $$VSPHERESIM_API_VERSION, else 8.0.3
SIM_API_VERSION ?=

.PHONY: vsphere-sim-build sim-up sim-down

sim-build: vsphere-sim-build

vsphere-sim-build: $(VSPHERE_SIM_BIN)

# rebuilt only when a Go source or the module files change
$(VSPHERE_SIM_BIN): $(VSPHERE_SIM_DEPS)
	mkdir -p $(dir $@)
	cd $(VSPHERE_SIM_SRC) && go build -o $(CURDIR)/$@ .

# start in the background; .sim/vsphere.env holds the VMWARE_* variables
sim-up: $(VSPHERE_SIM_BIN)
	@if [ -f $(SIM_DIR)/vsphere.pid ] && kill -0 $$(cat $(SIM_DIR)/vsphere.pid) 2>/dev/null; then \
		echo "vSphere simulator already running (pid $$(cat $(SIM_DIR)/vsphere.pid))"; exit 0; fi; \
	rm -f $(SIM_DIR)/vsphere.env $(SIM_DIR)/vsphere.ready; \
	nohup $(VSPHERE_SIM_BIN) -fleet $(FLEET) -listen 127.0.0.1:$(SIM_PORT) -state-dir $(SIM_DIR) \
		-env-file $(SIM_DIR)/vsphere.env -reboot-seconds $(SIM_REBOOT_SECONDS) $(if $(SIM_API_VERSION),-api-version $(SIM_API_VERSION)) \
		> $(SIM_DIR)/vsphere.ready 2> $(SIM_DIR)/vsphere.log & echo $$! > $(SIM_DIR)/vsphere.pid; \
	for i in $$(seq 1 300); do \
		if grep -q '^READY ' $(SIM_DIR)/vsphere.ready 2>/dev/null; then cat $(SIM_DIR)/vsphere.ready; exit 0; fi; \
		if ! kill -0 $$(cat $(SIM_DIR)/vsphere.pid) 2>/dev/null; then cat $(SIM_DIR)/vsphere.log; exit 1; fi; \
		sleep 0.1; done; echo "vSphere simulator did not become ready"; cat $(SIM_DIR)/vsphere.log; exit 1

sim-down:
	@if [ -f $(SIM_DIR)/vsphere.pid ]; then \
		pid=$$(cat $(SIM_DIR)/vsphere.pid); \
		if kill -0 $$pid 2>/dev/null; then kill -TERM $$pid; \
			for i in $$(seq 1 100); do kill -0 $$pid 2>/dev/null || break; sleep 0.1; done; fi; \
		rm -f $(SIM_DIR)/vsphere.pid $(SIM_DIR)/vsphere.ready; echo "vSphere simulator stopped"; \
	else echo "vSphere simulator not running"; fi
