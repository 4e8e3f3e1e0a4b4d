"""ImageClusters: the image-only refusal of a direct driver install reads nothing on 8.x, and on 9.x the host's
cluster and its image enablement."""
import types

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._image_clusters import ImageClusters


class Client:
    def __init__(self, version):
        self.content = types.SimpleNamespace(about=types.SimpleNamespace(apiVersion=version))
        self.retrievals = 0

    def clusters_by_name(self):
        self.retrievals += 1
        host = types.SimpleNamespace(_moId="host-1")
        return {"gpu-a": Cluster("domain-c1", "gpu-a", [host]), "empty": Cluster("domain-c2", "empty", [])}


class Cluster(dict):
    def __init__(self, moid, name, hosts):
        dict.__init__(self, name=name, host=hosts)
        self.moid = moid


class Rest:
    def __init__(self, enabled):
        self.enabled = enabled
        self.paths = []

    def get(self, path, **_kw):
        self.paths.append(path)
        return {"enabled": self.enabled}


HOST = types.SimpleNamespace(moid="host-1")


def test_on_8x_nothing_is_read_and_nothing_refused():
    client, rest = Client("8.0.3.0"), Rest(True)
    assert ImageClusters(client, lambda: rest).install_refusal(HOST, "esx-1", "550.90.05") is None
    assert client.retrievals == 0 and rest.paths == []


def test_on_9x_an_image_cluster_refuses():
    client, rest = Client("9.1.0.0"), Rest(True)
    why = ImageClusters(client, lambda: rest).install_refusal(HOST, "esx-1", "550.90.05")
    assert "cluster gpu-a" in why and "vlcm_component" in why
    assert rest.paths == ["/api/esx/settings/clusters/domain-c1/enablement/software"]


def test_on_9x_a_cluster_without_an_image_or_a_standalone_host_goes_ahead():
    assert ImageClusters(Client("9.0.0.0"), lambda: Rest(False)).install_refusal(HOST, "esx-1", "550.90.05") is None
    alone = types.SimpleNamespace(moid="host-9")
    rest = Rest(True)
    assert ImageClusters(Client("9.0.0.0"), lambda: rest).install_refusal(alone, "esx-9", "550.90.05") is None
    assert rest.paths == []
