# A Cluster API Machine on AWS: one EC2 instance in its failure domain's subnet, booted
# with the bootstrap data as its user data; a control plane machine is also a target of
# the cluster's API server load balancer.

locals {
  exports   = var.captf_cluster_outputs
  subnets   = try(local.exports.subnet_ids, {})
  zone      = var.failure_domain != null ? var.failure_domain : sort(keys(local.subnets))[0]
  api_group = try(local.exports.control_plane_target_group_arn, null)
  tags = merge(var.tags, var.captf_tags, {
    Name                                              = var.machine_name
    "kubernetes.io/cluster/${var.captf_cluster.name}" = "owned"
  })
  security_groups = concat(
    [local.exports.node_security_group_id],
    var.control_plane ? [local.exports.control_plane_security_group_id] : [],
    var.additional_security_group_ids,
  )
}

data "aws_ami" "named" {
  count       = var.ami_id == null ? 1 : 0
  most_recent = true
  owners      = var.ami_owners

  filter {
    name   = "name"
    values = [var.ami_name]
  }
}

resource "aws_instance" "this" {
  ami                    = var.ami_id != null ? var.ami_id : data.aws_ami.named[0].id
  instance_type          = var.instance_type
  subnet_id              = local.subnets[local.zone]
  vpc_security_group_ids = local.security_groups
  key_name               = var.key_name
  iam_instance_profile   = var.control_plane ? var.control_plane_instance_profile : var.instance_profile
  user_data_base64       = var.bootstrap_data
  tags                   = local.tags
  volume_tags            = local.tags

  root_block_device {
    volume_size = var.root_volume_size
    volume_type = var.root_volume_type
    encrypted   = true
  }

  metadata_options {
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }

  # A machine is applied once; a newer image behind ami_name must not read as drift.
  lifecycle {
    ignore_changes = [ami]
  }
}

resource "aws_lb_target_group_attachment" "api" {
  count = var.control_plane && local.api_group != null ? 1 : 0

  target_group_arn = local.api_group
  target_id        = aws_instance.this.id
  port             = try(local.exports.api_server_port, 6443)
}

# What the outputs say of the instance, kept in the state on its own: a refresh drops a
# terminated instance from the state, and the outputs must still name it to say so.
resource "terraform_data" "instance" {
  input = {
    id          = aws_instance.this.id
    zone        = aws_instance.this.availability_zone
    private_ip  = aws_instance.this.private_ip
    private_dns = aws_instance.this.private_dns
    public_ip   = aws_instance.this.public_ip
    public_dns  = aws_instance.this.public_dns
  }
}

# The instance's state as EC2 reports it now, read at every refresh (the health watch):
# each query answers with the id when the instance is in one of its states.
data "aws_instances" "running" {
  instance_state_names = ["running"]
  filter {
    name   = "instance-id"
    values = [terraform_data.instance.output.id]
  }
}

data "aws_instances" "pending" {
  instance_state_names = ["pending"]
  filter {
    name   = "instance-id"
    values = [terraform_data.instance.output.id]
  }
}

data "aws_instances" "stopped" {
  instance_state_names = ["stopping", "stopped"]
  filter {
    name   = "instance-id"
    values = [terraform_data.instance.output.id]
  }
}

locals {
  seen = terraform_data.instance.output
  # Shutting down, terminated, or gone from EC2 altogether: terminated.
  state = (
    length(data.aws_instances.running.ids) > 0 ? "running"
    : length(data.aws_instances.pending.ids) > 0 ? "pending"
    : length(data.aws_instances.stopped.ids) > 0 ? "stopped"
    : "terminated"
  )
}
