package dashboards_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// No Docker engine runs the tests, so docker-compose.yml's Prometheus and Grafana are checked by shape: what
// they mount from the repository exists, Prometheus reads deploy/prometheus's config and rules and the shared
// services directory's targets/ (the file-based target list every clone shares), and Grafana's provisioned
// data source points where Prometheus listens.
func TestCompose_PrometheusAndGrafanaProvisionRulesAndDashboard(t *testing.T) {
	repo := filepath.Join("..", "..")
	var compose struct {
		Services map[string]struct {
			Image       string   `yaml:"image"`
			NetworkMode string   `yaml:"network_mode"`
			Command     []string `yaml:"command"`
			Volumes     []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	file, err := os.ReadFile(filepath.Join(repo, "docker-compose.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(file, &compose))

	mounts := map[string]string{} // container path → repository path
	for _, name := range []string{"prometheus", "grafana"} {
		svc, ok := compose.Services[name]
		require.True(t, ok, "service %s", name)
		assert.NotEmpty(t, svc.Image, name)
		assert.Equal(t, "host", svc.NetworkMode, "%s scrapes/reads 127.0.0.1 of the host", name)
		for _, v := range svc.Volumes {
			host, container := splitVolume(t, v)
			if strings.HasPrefix(host, "./") {
				_, err := os.Stat(filepath.Join(repo, host))
				assert.NoError(t, err, "%s mounts %s", name, host)
			}
			mounts[container] = host
		}
	}
	prom := compose.Services["prometheus"]
	assert.Contains(t, prom.Command, "--config.file=/etc/prometheus/prometheus.yml")
	assert.Equal(t, "./deploy/prometheus/prometheus.yml", mounts["/etc/prometheus/prometheus.yml"])
	assert.Equal(t, "./deploy/prometheus/rules.yml", mounts["/etc/prometheus/rules.yml"])
	assert.Equal(t, "${RMQGUARD_SERVICES_DIR:-~/.local/state/rmqguard}/prometheus/targets", mounts["/etc/prometheus/targets"],
		"the targets folder of the shared services directory (deploy/local/env.sh's default)")
	assert.Equal(t, "./deploy/grafana/provisioning", mounts["/etc/grafana/provisioning"])
	assert.Equal(t, "./deploy/grafana/rmqguard.json", mounts["/var/lib/grafana/dashboards/rmqguard.json"])

	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	file, err = os.ReadFile(filepath.Join(repo, "deploy", "grafana", "provisioning", "datasources", "prometheus.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(file, &ds))
	require.Len(t, ds.Datasources, 1)
	assert.Equal(t, "prometheus", ds.Datasources[0].Type)
	listen := strings.TrimPrefix(ds.Datasources[0].URL, "http://")
	assert.True(t, slices.Contains(prom.Command, "--web.listen-address="+listen), "data source %s, Prometheus %v", ds.Datasources[0].URL, prom.Command)

	var provider struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	file, err = os.ReadFile(filepath.Join(repo, "deploy", "grafana", "provisioning", "dashboards", "rmqguard.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(file, &provider))
	require.Len(t, provider.Providers, 1)
	assert.Equal(t, "/var/lib/grafana/dashboards", provider.Providers[0].Options.Path, "where the dashboard is mounted")
}

// splitVolume splits a short-syntax volume "host:container[:mode]" whose host part may be a ${VAR:-default}
// interpolation (which has colons of its own).
func splitVolume(t *testing.T, v string) (host, container string) {
	t.Helper()
	rest := v
	if strings.HasPrefix(v, "${") {
		end := strings.Index(v, "}")
		require.Positive(t, end, v)
		i := strings.Index(v[end:], ":")
		require.Positive(t, i, v)
		host, rest = v[:end+i], v[end+i+1:]
	} else {
		i := strings.Index(v, ":")
		require.Positive(t, i, v)
		host, rest = v[:i], v[i+1:]
	}
	container, _, _ = strings.Cut(rest, ":")
	return host, container
}
