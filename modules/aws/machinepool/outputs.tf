# The machinepool role's contract outputs (v1alpha1).

output "provider_id" {
  value = aws_autoscaling_group.this.arn
}

# Every live member, pending or running: Cluster API deletes the Node of an ID that
# leaves the list.
output "provider_id_list" {
  value = sort([for member in local.members : member.provider_id])
}

output "replicas" {
  value = local.desired
}

output "instances" {
  value = local.members
}

output "health" {
  value = {
    state   = "running"
    healthy = length(local.members) >= local.desired
    message = "${length(local.members)} of ${local.desired} instances live"
    reasons = []
  }
}
