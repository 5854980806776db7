// Package cloudinit renders the user data every Groundwork VM boots with:
// install Docker, create the nginx-on-zop-net bridge network, run NGINX on it (skipped in bare
// mode), and write a sentinel file last, which the create-VMs step polls for readiness.
package cloudinit

import (
	"bytes"
	"fmt"
	"text/template"
)

// SentinelPath is the file that exists once bootstrap finished; until then a VM is in state
// "bootstrap".
const SentinelPath = "/var/lib/groundwork/bootstrap-complete"

// NetworkName is the Docker bridge network the reference names.
const NetworkName = "nginx-on-zop-net"

// Options shape the script.
type Options struct {
	// Bare skips NGINX: Docker and the network only.
	Bare bool
	// NginxImage defaults to DefaultNginxImage.
	NginxImage string
	// JobID is written into the sentinel, so a poller can tell this job's bootstrap apart.
	JobID string
	// Report, if set, is a shell command run after the sentinel is written, for a cloud
	// whose poller reads readiness elsewhere than the VM's disk (GCP reads a guest
	// attribute the command sets).
	Report string
}

// DefaultNginxImage is a pinned image, so that two VMs of one pool run the same NGINX.
const DefaultNginxImage = "nginx:1.27-alpine"

var script = template.Must(template.New("user-data").Parse(`#cloud-config
# Rendered by Groundwork for job {{.JobID}}. Do not edit: a new launch template version replaces it.
package_update: true
write_files:
  - path: /usr/local/sbin/groundwork-bootstrap.sh
    permissions: "0755"
    content: |
      #!/bin/sh
      set -eu
      # 1. Docker, from the distribution's own packages.
      if ! command -v docker >/dev/null 2>&1; then
        if command -v dnf >/dev/null 2>&1; then dnf install -y docker;
        elif command -v yum >/dev/null 2>&1; then yum install -y docker;
        else apt-get update -y && apt-get install -y docker.io; fi
      fi
      systemctl enable --now docker
      # 2. The bridge network services share on this VM.
      docker network inspect {{.Network}} >/dev/null 2>&1 || docker network create --driver bridge {{.Network}}
{{- if not .Bare}}
      # 3. NGINX on the bridge, routing between the VM's services.
      mkdir -p /etc/groundwork/nginx/conf.d
      [ -f /etc/groundwork/nginx/conf.d/default.conf ] || cat > /etc/groundwork/nginx/conf.d/default.conf <<'CONF'
      server {
        listen 80 default_server;
        location = /healthz { access_log off; return 200 "ok\n"; }
        location / { return 404; }
      }
      CONF
      docker inspect groundwork-nginx >/dev/null 2>&1 || docker run -d --name groundwork-nginx \
        --restart unless-stopped --network {{.Network}} -p 80:80 \
        -v /etc/groundwork/nginx/conf.d:/etc/nginx/conf.d:ro {{.Image}}
{{- end}}
      # 4. The sentinel, last: its presence means the VM is ready for workloads.
      mkdir -p /var/lib/groundwork
      echo "job={{.JobID}} nginx={{if .Bare}}skipped{{else}}ready{{end}}" > {{.Sentinel}}
{{- if .Report}}
      {{.Report}}
{{- end}}
runcmd:
  - [/usr/local/sbin/groundwork-bootstrap.sh]
`))

// Render returns the user data for o.
func Render(o Options) (string, error) {
	if o.NginxImage == "" {
		o.NginxImage = DefaultNginxImage
	}
	var b bytes.Buffer
	err := script.Execute(&b, map[string]any{
		"JobID": o.JobID, "Bare": o.Bare, "Report": o.Report, "Image": o.NginxImage, "Network": NetworkName, "Sentinel": SentinelPath,
	})
	if err != nil {
		return "", fmt.Errorf("render cloud-init: %w", err)
	}
	return b.String(), nil
}
