"""Athena over the fleet dataset: a Glue database and tables (partition projection by hour), an enforced
workgroup with encrypted results and a scanned-bytes cutoff, the named queries, and a policy for analysts.

The tables' columns are :data:`smx_debug.contracts.FLEET_TABLES` (the writer's schema comes from the same
place); the named queries are the package's SQL files transpiled to Athena's dialect
(:func:`smx_debug.fleet.to_athena`), so the console runs exactly what ``smx-debug fleet --engine athena`` runs.
"""

from __future__ import annotations

from typing import Final

import aws_cdk as cdk
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.components.nag import acknowledge_wildcards
from smx_debug.contracts import (
    FLEET_HOUR_COLUMN,
    FLEET_HOUR_FORMAT,
    FLEET_PREFIX,
    FLEET_TABLES,
    fleet_database_name,
    fleet_workgroup_name,
)
from smx_debug.fleet import list_queries, to_athena

RESULTS_PREFIX: Final = "smx-debug/athena-results/"
MIN_BYTES_SCANNED_CUTOFF: Final = 10_000_000  # Athena's own minimum for BytesScannedCutoffPerQuery
PROJECTION_START: Final = "2024010100"  # the first hour partition projection enumerates
ATHENA_ENGINE: Final = "Athena engine version 3"
_PARQUET = {
    "input_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "output_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "serde": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
}
# What an analyst needs to run the named queries in the workgroup: nothing more.
ANALYST_ATHENA_ACTIONS: Final = (
    "athena:StartQueryExecution", "athena:GetQueryExecution", "athena:GetQueryResults", "athena:StopQueryExecution",
    "athena:GetWorkGroup", "athena:ListNamedQueries", "athena:GetNamedQuery", "athena:BatchGetNamedQuery",
    "athena:ListQueryExecutions",
)
ANALYST_GLUE_ACTIONS: Final = ("glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartition",
                               "glue:GetPartitions")


class FleetAnalytics(Construct):
    """Glue tables, the workgroup, the named queries and the analysts' policy over ``bucket``'s fleet prefix.

    Attributes:
        database_name, workgroup_name: what ``smx-debug fleet --engine athena`` uses (stack outputs).
        workgroup: the workgroup; tables: table name -> CfnTable; named_queries: query name -> CfnNamedQuery.
        analyst_policy: the managed policy to attach to whoever may query the fleet.
    """

    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.IBucket, stack_name: str,
                 bytes_scanned_cutoff: int) -> None:
        super().__init__(scope, construct_id)

        if bytes_scanned_cutoff < MIN_BYTES_SCANNED_CUTOFF:  # the config validates first; this guards direct use
            raise ValueError(f"bytes_scanned_cutoff {bytes_scanned_cutoff} < {MIN_BYTES_SCANNED_CUTOFF}")
        stack = cdk.Stack.of(self)
        self.database_name = fleet_database_name(stack_name)
        self.workgroup_name = fleet_workgroup_name(stack_name)
        self.root = f"s3://{bucket.bucket_name}/{FLEET_PREFIX}"
        database = glue.CfnDatabase(self, "Database", catalog_id=stack.account, database_input=glue.CfnDatabase
                                    .DatabaseInputProperty(name=self.database_name,
                                                           description="smx-debug fleet dataset (docs/fleet.md)"))
        self.tables: dict[str, glue.CfnTable] = {}
        for spec in FLEET_TABLES.values():
            location = f"s3://{bucket.bucket_name}/{FLEET_PREFIX}{spec.name}/"
            parameters = {"classification": "parquet", "parquet.compression": "ZSTD"}
            partitions = []
            if spec.hour_of is not None:
                key = FLEET_HOUR_COLUMN
                partitions = [glue.CfnTable.ColumnProperty(name=key, type="string",
                                                           comment=f"UTC hour of {spec.hour_of}, yyyyMMddHH")]
                parameters.update({
                    "projection.enabled": "true",
                    f"projection.{key}.type": "date",
                    f"projection.{key}.format": FLEET_HOUR_FORMAT[1],
                    f"projection.{key}.range": f"{PROJECTION_START},NOW",
                    f"projection.{key}.interval": "1",
                    f"projection.{key}.interval.unit": "HOURS",
                    "storage.location.template": f"{location}{key}=${{{key}}}/",
                })
            table = glue.CfnTable(
                self, f"Table{''.join(p.title() for p in spec.name.split('_'))}", catalog_id=stack.account,
                database_name=self.database_name,
                table_input=glue.CfnTable.TableInputProperty(
                    name=spec.name, description=spec.description[:2048], table_type="EXTERNAL_TABLE",
                    parameters=parameters, partition_keys=partitions or None,
                    storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                        columns=[glue.CfnTable.ColumnProperty(name=n, type=t) for n, t in spec.columns],
                        location=location, input_format=_PARQUET["input_format"],
                        output_format=_PARQUET["output_format"],
                        serde_info=glue.CfnTable.SerdeInfoProperty(serialization_library=_PARQUET["serde"]),
                    ),
                ),
            )
            table.node.add_dependency(database)
            self.tables[spec.name] = table
        self.workgroup = athena.CfnWorkGroup(
            self, "WorkGroup", name=self.workgroup_name, state="ENABLED", recursive_delete_option=True,
            description="smx-debug fleet queries: enforced settings, encrypted results, a scanned-bytes cutoff",
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=bytes_scanned_cutoff,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(selected_engine_version=ATHENA_ENGINE),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{bucket.bucket_name}/{RESULTS_PREFIX}",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"),  # the bucket's own encryption (S3-managed keys)
                ),
            ),
        )
        self.named_queries: dict[str, athena.CfnNamedQuery] = {}
        for query in list_queries():
            sql, _ = to_athena(query)
            named = athena.CfnNamedQuery(
                self, f"Query{''.join(p.title() for p in query.name.split('_'))}", name=query.name,
                database=self.database_name, work_group=self.workgroup_name, query_string=sql,
                description=query.description[:1024])
            named.node.add_dependency(self.workgroup)
            named.node.add_dependency(database)
            self.named_queries[query.name] = named
        self.analyst_policy = self._analyst_policy(bucket, stack)

    def _analyst_policy(self, bucket: s3.IBucket, stack: cdk.Stack) -> iam.ManagedPolicy:
        workgroup_arn = stack.format_arn(service="athena", resource="workgroup", resource_name=self.workgroup_name)
        catalog = stack.format_arn(service="glue", resource="catalog")
        database = stack.format_arn(service="glue", resource="database", resource_name=self.database_name)
        tables = stack.format_arn(service="glue", resource="table", resource_name=f"{self.database_name}/*")
        data = bucket.arn_for_objects(f"{FLEET_PREFIX}*")
        results = bucket.arn_for_objects(f"{RESULTS_PREFIX}*")
        policy = iam.ManagedPolicy(
            self, "AnalystPolicy",
            description="smx-debug: query the fleet dataset with Athena in its workgroup (docs/fleet.md)",
            statements=[
                iam.PolicyStatement(actions=list(ANALYST_ATHENA_ACTIONS), resources=[workgroup_arn]),
                iam.PolicyStatement(actions=list(ANALYST_GLUE_ACTIONS), resources=[catalog, database, tables]),
                iam.PolicyStatement(actions=["s3:GetObject"], resources=[data, results]),
                iam.PolicyStatement(actions=["s3:PutObject", "s3:AbortMultipartUpload"], resources=[results]),
                iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
                                    conditions={"StringLike": {"s3:prefix": [f"{FLEET_PREFIX}*",
                                                                             f"{RESULTS_PREFIX}*"]}}),
                iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn]),
            ],
        )
        acknowledge_wildcards(
            policy, resources=[tables, data, results],
            reason="The fleet database's tables, and the fleet dataset and Athena results prefixes of the bucket.")
        return policy
