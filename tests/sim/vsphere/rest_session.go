package main

// The vSphere Automation API session (/api/session), which vCenter 7.0 U2 and later serve
// and govmomi's vapi simulator does not (it only has the older /rest/com/vmware/cis/session).
// Each call is handed to that older endpoint, so the session ids are the vapi simulator's own
// and every other /api endpoint checks them: POST with HTTP basic auth returns the id as a
// JSON string (clients send it back in the vmware-api-session-id header); GET returns the
// session; DELETE ends it.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"

	"github.com/vmware/govmomi/simulator"
)

const legacySessionPath = "/rest/com/vmware/cis/session"

type restSession struct {
	svc *simulator.Service
}

func init() {
	simulator.RegisterEndpoint(func(s *simulator.Service, r *simulator.Registry) {
		if r.IsVPX() {
			s.Handle("/api/session", &restSession{svc: s})
		}
	})
}

func (h *restSession) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	inner, err := http.NewRequest(r.Method, legacySessionPath, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	inner.Header = r.Header.Clone()
	inner.URL.Scheme, inner.URL.Host, inner.Host = "https", r.Host, r.Host
	rec := httptest.NewRecorder()
	h.svc.ServeMux.ServeHTTP(rec, inner)

	w.Header().Set("Content-Type", "application/json")
	if rec.Code >= 400 {
		w.WriteHeader(rec.Code)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"error_type": "UNAUTHENTICATED",
			"messages": []map[string]string{{
				"id": "vapi.security.authentication.invalid", "default_message": "Authentication required.",
			}},
		})
		return
	}
	var body struct {
		Value json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	switch r.Method {
	case http.MethodPost:
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body.Value)
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		_, _ = w.Write(body.Value)
	}
}
