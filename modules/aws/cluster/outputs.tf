# The cluster role's contract outputs (v1alpha1).

output "control_plane_endpoint" {
  value = (
    local.create_lb
    ? { host = aws_lb.api["api"].dns_name, port = local.port }
    : var.control_plane_endpoint
  )
}

# One failure domain per zone; a machine placed in it gets that zone's subnet.
output "failure_domains" {
  value = [
    for zone in local.zones : {
      name          = zone
      control_plane = true
      attributes    = { subnet_id = aws_subnet.this[zone].id }
    }
  ]
}

# What every machine and pool of the cluster receives as captf_cluster_outputs.
output "exports" {
  value = {
    vpc_id                          = aws_vpc.this.id
    vpc_cidr                        = var.vpc_cidr
    subnet_ids                      = { for zone, subnet in aws_subnet.this : zone => subnet.id }
    node_security_group_id          = aws_security_group.nodes.id
    control_plane_security_group_id = aws_security_group.control_plane.id
    control_plane_target_group_arn  = local.create_lb ? aws_lb_target_group.api["api"].arn : null
    api_server_port                 = local.port
  }
}

output "health" {
  value = { state = "running", healthy = true, message = null, reasons = [] }
}
