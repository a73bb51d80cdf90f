# A cluster module with no cloud: terraform_data stands in for the network and
# the control-plane load balancer, so plans, state and outputs are real while
# nothing outside the state exists. It runs offline: no provider to install.

resource "terraform_data" "network" {
  input = {
    tags    = var.captf_tags
    network = var.cluster_network
  }
}

resource "terraform_data" "load_balancer" {
  # Only created when nobody else supplies the endpoint.
  count = var.control_plane_endpoint == null ? 1 : 0
  input = {
    tags = var.captf_tags
    host = var.endpoint_host
    port = var.endpoint_port
  }
}

locals {
  endpoint = (
    var.control_plane_endpoint != null
    ? var.control_plane_endpoint
    : { host = var.endpoint_host, port = var.endpoint_port }
  )
}

output "control_plane_endpoint" {
  value = local.endpoint
}

output "failure_domains" {
  value = [for zone in var.zones : { name = zone, control_plane = true, attributes = {} }]
}

# Handed to every machine and pool of the cluster as captf_cluster_outputs.
output "exports" {
  value = {
    network_id = terraform_data.network.id
    endpoint   = local.endpoint
  }
}

output "health" {
  value = { state = "running", healthy = true, message = null, reasons = [] }
}
