# A machine pool whose cloud group manages its own size, to the public module contract
# (v1alpha1): with `autoscaling.enabled` the group's size is what the group's API
# reports, read through a data source on every plan and refresh, not the replicas the
# module was given. The "API" is a local file (the `local` provider's data source), so
# the group grows or shrinks when something outside Cluster API rewrites it. Offline.

data "local_file" "group" {
  count    = var.group_file == null ? 0 : 1
  filename = var.group_file
}

locals {
  reported = (
    var.group_file == null ? var.replicas : tonumber(trimspace(data.local_file.group[0].content))
  )
  # Without autoscaling the group is held at the replicas asked for.
  size = var.autoscaling.enabled ? local.reported : var.replicas
  # Namespaced ids: the workload cluster's Nodes are cluster-scoped.
  members = [
    for i in range(local.size) :
    "captf://${var.captf_cluster.namespace}/${var.machinepool_name}/${i}"
  ]
}

# The group itself: its bounds while it scales on its own, its size only when it does not.
resource "terraform_data" "group" {
  input = {
    tags          = var.captf_tags
    name          = var.machinepool_name
    min           = var.autoscaling.enabled ? var.autoscaling.min : null
    max           = var.autoscaling.enabled ? var.autoscaling.max : null
    desired       = var.autoscaling.enabled ? null : var.replicas
    user_data_sha = sha256(var.bootstrap_data)
  }
}

output "provider_id" {
  value = null
}

output "provider_id_list" {
  value = sort(local.members)
}

output "replicas" {
  value = local.size
}

output "instances" {
  value = [for id in local.members : { provider_id = id, state = "running" }]
}

output "health" {
  value = { state = "running", healthy = true, message = null, reasons = [] }
}
