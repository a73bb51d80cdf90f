# A Cluster API cluster's network on AWS: a VPC, a public subnet per failure domain (an
# availability zone), the security groups its machines join, and a network load
# balancer in front of the API server whose DNS name is the control plane endpoint.

data "aws_availability_zones" "available" {
  count = length(var.availability_zones) == 0 ? 1 : 0
  state = "available"
}

locals {
  # AWS caps load balancer and target group names at 32 characters: a digest of the
  # Cluster's namespace and name is unique and fits; the Name tag says which it is.
  id   = substr(sha1("${var.captf_cluster.namespace}/${var.captf_cluster.name}"), 0, 12)
  name = "${var.captf_cluster.namespace}-${var.captf_cluster.name}"
  # The contract's tags win over a team's, and the cloud provider's cluster tag marks
  # what Kubernetes' AWS cloud provider may use.
  tags = merge(var.tags, var.captf_tags, { "kubernetes.io/cluster/${var.captf_cluster.name}" = "owned" })
  zones = (
    length(var.availability_zones) > 0
    ? var.availability_zones
    : slice(
      sort(data.aws_availability_zones.available[0].names), 0,
      min(var.zone_count, length(data.aws_availability_zones.available[0].names))
    )
  )
  port       = try(coalesce(var.cluster_network.api_server_port, 6443), 6443)
  create_lb  = var.control_plane_endpoint == null
  lb_enabled = local.create_lb ? toset(["api"]) : toset([])
}

resource "aws_vpc" "this" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = merge(local.tags, { Name = local.name })
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id
  tags   = merge(local.tags, { Name = local.name })
}

resource "aws_subnet" "this" {
  for_each = { for index, zone in local.zones : zone => index }

  vpc_id                  = aws_vpc.this.id
  availability_zone       = each.key
  cidr_block              = cidrsubnet(var.vpc_cidr, 8, each.value)
  map_public_ip_on_launch = true
  tags = merge(local.tags, {
    Name                     = "${local.name}-${each.key}"
    "kubernetes.io/role/elb" = "1"
  })
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.this.id
  tags   = merge(local.tags, { Name = "${local.name}-public" })
}

resource "aws_route" "internet" {
  route_table_id         = aws_route_table.public.id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = aws_internet_gateway.this.id
}

resource "aws_route_table_association" "public" {
  for_each = aws_subnet.this

  subnet_id      = each.value.id
  route_table_id = aws_route_table.public.id
}

# Every machine of the cluster: all traffic among themselves, anything out.
resource "aws_security_group" "nodes" {
  name        = "${local.name}-nodes"
  description = "Machines of Cluster ${local.name}"
  vpc_id      = aws_vpc.this.id
  tags        = merge(local.tags, { Name = "${local.name}-nodes" })
}

resource "aws_vpc_security_group_ingress_rule" "nodes_among_themselves" {
  security_group_id            = aws_security_group.nodes.id
  referenced_security_group_id = aws_security_group.nodes.id
  ip_protocol                  = "-1"
  tags                         = local.tags
}

resource "aws_vpc_security_group_egress_rule" "nodes_out" {
  security_group_id = aws_security_group.nodes.id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  tags              = local.tags
}

# Control plane machines also: the API server's port from its clients and, inside the
# VPC, from the load balancer's health checks (a network load balancer keeps the
# client's address, so both reach the instance as they are).
resource "aws_security_group" "control_plane" {
  name        = "${local.name}-control-plane"
  description = "Control plane machines of Cluster ${local.name}"
  vpc_id      = aws_vpc.this.id
  tags        = merge(local.tags, { Name = "${local.name}-control-plane" })
}

resource "aws_vpc_security_group_ingress_rule" "api_server" {
  for_each = toset(concat(var.api_server_cidrs, [var.vpc_cidr]))

  security_group_id = aws_security_group.control_plane.id
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = local.port
  to_port           = local.port
  tags              = local.tags
}

resource "aws_lb" "api" {
  for_each = local.lb_enabled

  name                             = "k8s-${local.id}"
  internal                         = var.internal_load_balancer
  load_balancer_type               = "network"
  subnets                          = [for zone in local.zones : aws_subnet.this[zone].id]
  enable_cross_zone_load_balancing = true
  tags                             = merge(local.tags, { Name = "${local.name}-api" })

  depends_on = [aws_internet_gateway.this]
}

resource "aws_lb_target_group" "api" {
  for_each = local.lb_enabled

  name        = "k8s-${local.id}"
  port        = local.port
  protocol    = "TCP"
  vpc_id      = aws_vpc.this.id
  target_type = "instance"
  tags        = merge(local.tags, { Name = "${local.name}-api" })

  health_check {
    protocol = "TCP"
  }
}

resource "aws_lb_listener" "api" {
  for_each = local.lb_enabled

  load_balancer_arn = aws_lb.api[each.key].arn
  port              = local.port
  protocol          = "TCP"
  tags              = local.tags

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.api[each.key].arn
  }
}
