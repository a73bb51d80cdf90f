# A machine pool module with no cloud: one terraform_data is the scaling group,
# and its members are numbered. Runs offline.

locals {
  # The pool's own domains, else every domain of the cluster.
  zones = length(var.failure_domains) > 0 ? var.failure_domains : var.cluster_failure_domains
  members = [
    for i in range(var.replicas) : {
      id   = "captf://${var.captf_cluster.name}/${var.machinepool_name}/${i}"
      zone = length(local.zones) > 0 ? local.zones[i % length(local.zones)] : null
    }
  ]
}

resource "terraform_data" "group" {
  input = {
    tags          = var.captf_tags
    name          = var.machinepool_name
    instance_type = var.instance_type
    desired       = var.replicas
    zones         = local.zones
    node_labels   = var.node_labels
    network_id    = try(var.captf_cluster_outputs.network_id, null)
    user_data_sha = sha256(var.bootstrap_data)
  }
}

output "provider_id" {
  value = "captf://${var.captf_cluster.name}/${var.machinepool_name}"
}

output "provider_id_list" {
  value = sort([for member in local.members : member.id])
}

output "replicas" {
  value = var.replicas
}

output "instances" {
  value = [
    for member in local.members : {
      provider_id    = member.id
      failure_domain = member.zone
      state          = "running"
    }
  ]
}

output "health" {
  value = { state = "running", healthy = true, message = null, reasons = [] }
}
