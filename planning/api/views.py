"""Planning API: catalogs (versioned), fleets, workloads, scenarios, change history.

Every viewset reads through a team-scoped queryset (other teams' objects answer 404) and writes through a
service (validation, transaction, change log).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.viewsets import ServiceModelViewSet
from accounts.permissions import TeamScopedViewSetMixin
from accounts.roles import Capability
from accounts.scoping import require_capability
from core.api.parsers import SafeFormParser as FormParser
from core.api.parsers import SafeJSONParser as JSONParser
from core.api.parsers import SafeMultiPartParser as MultiPartParser
from planning import selectors, services
from planning.api.filtersets import (
    CatalogFilterSet,
    CatalogItemFilter,
    CatalogVersionFilterSet,
    FleetFilterSet,
    ObjectChangeFilterSet,
    ScenarioFilterSet,
    WorkloadFilterSet,
)
from planning.api.serializers import (
    CatalogForkSerializer,
    CatalogItemCreateSerializer,
    CatalogItemSerializer,
    CatalogSerializer,
    CatalogVersionSerializer,
    CsvImportSerializer,
    FleetSerializer,
    ObjectChangeSerializer,
    ScenarioSerializer,
    WorkloadSerializer,
)
from planning.models import (
    Catalog,
    CatalogItem,
    CatalogVersion,
    Fleet,
    ObjectChange,
    Scenario,
    Workload,
)
from planning.selectors import change_list


# --- catalogs ------------------------------------------------------------------------------------------
class CatalogViewSet(ServiceModelViewSet):
    """Catalogs. The global default (team null) is read-only; POST with ``fork_from`` forks a catalog."""

    queryset = Catalog.objects.select_related("team").order_by("name", "id")
    serializer_class = CatalogSerializer
    write_capability = Capability.CATALOG
    action_capabilities = {"fork": Capability.READ}
    filterset_class = CatalogFilterSet
    selector = staticmethod(selectors.catalog_list)  # reads go through the app's selector
    search_fields = ("name", "description")
    ordering_fields = ("name", "created_at", "updated_at")

    def do_create(self, *, team: Any, data: dict[str, Any]) -> Catalog:
        source = data.pop("fork_from", None)
        if source is not None:
            return services.catalog_fork(catalog=source, team=team, user=self.request.user, name=data.get("name"))
        return services.catalog_create(team=team, user=self.request.user, name=data.get("name", ""),
                                       description=data.get("description", ""))

    def do_update(self, *, instance: Catalog, data: dict[str, Any]) -> Catalog:
        return services.catalog_update(catalog=instance, user=self.request.user, name=data.get("name"),
                                       description=data.get("description"))

    def do_delete(self, *, instance: Catalog) -> None:
        services.catalog_delete(catalog=instance, user=self.request.user)

    @extend_schema(request=CatalogForkSerializer, responses={201: CatalogSerializer})
    @action(detail=True, methods=["post"])
    def fork(self, request: Request, pk: Any = None) -> Response:
        """Fork this catalog (any readable one, e.g. the global default) into your team."""
        catalog = self.get_object()  # READ on the source; CATALOG in the target team (get_target_team)
        ser = CatalogForkSerializer(data=request.data, context=self.get_serializer_context())
        ser.is_valid(raise_exception=True)
        fork = services.catalog_fork(catalog=catalog, team=self.get_target_team(), user=request.user,
                                     name=ser.validated_data.get("name"), version=ser.validated_data.get("version"))
        return Response(CatalogSerializer(fork, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(responses=CatalogVersionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def versions(self, request: Request, pk: Any = None) -> Response:
        catalog = self.get_object()
        page = self.paginate_queryset(catalog.versions.order_by("-number"))
        return self.get_paginated_response(CatalogVersionSerializer(page, many=True).data)

    @extend_schema(request={"multipart/form-data": CsvImportSerializer}, responses={201: CatalogVersionSerializer})
    @action(detail=True, methods=["post"], url_path="import", parser_classes=[MultiPartParser, FormParser])
    def import_items(self, request: Request, pk: Any = None) -> Response:
        """Bulk upsert items from CSV as one new version. Any bad row rejects the file (errors per line)."""
        catalog = self.get_object()
        ser = CsvImportSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        version = services.catalog_items_import(catalog=catalog, user=request.user, file=ser.validated_data["file"],
                                                note=ser.validated_data.get("note", ""))
        return Response(CatalogVersionSerializer(version).data, status=status.HTTP_201_CREATED)


class CatalogVersionViewSet(TeamScopedViewSetMixin, mixins.ListModelMixin,
                            mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Catalog versions (immutable). DELETE is refused with 409 and the dependents while in use."""

    queryset = CatalogVersion.objects.select_related("catalog", "created_by").order_by("catalog_id", "-number")
    serializer_class = CatalogVersionSerializer
    write_capability = Capability.CATALOG
    filterset_class = CatalogVersionFilterSet
    selector = staticmethod(selectors.catalog_version_list)  # reads go through the app's selector
    ordering_fields = ("number", "effective_date", "created_at")

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        services.catalog_version_delete(version=self.get_object(), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=CatalogItemSerializer(many=True))
    @action(detail=True, methods=["get"])
    def items(self, request: Request, pk: Any = None) -> Response:
        version = self.get_object()
        qs = version.items.select_related("version").order_by("kind", "key")
        if request.query_params.get("kind"):
            qs = qs.filter(kind=request.query_params["kind"])
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(CatalogItemSerializer(page, many=True).data)


class CatalogItemViewSet(ServiceModelViewSet):
    """Catalog items. Every write creates the next catalog version; the returned item is in it."""

    queryset = CatalogItem.objects.select_related("version__catalog").order_by("version_id", "kind", "key")
    serializer_class = CatalogItemSerializer
    write_capability = Capability.CATALOG
    filterset_class = CatalogItemFilter
    selector = staticmethod(selectors.catalog_item_list)  # reads go through the app's selector
    search_fields = ("key", "name")
    ordering_fields = ("key", "kind", "unit_price_usd", "power_w")

    def get_serializer_class(self) -> Any:
        return CatalogItemCreateSerializer if self.action == "create" else CatalogItemSerializer

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ser = CatalogItemCreateSerializer(data=request.data, context=self.get_serializer_context())
        ser.is_valid(raise_exception=True)
        data = dict(ser.validated_data)
        catalog = data.pop("catalog")
        if catalog.team_id is None:
            services._require_team_catalog(catalog)
        require_capability(request, catalog.team_id, Capability.CATALOG)
        item = services.catalog_item_create(catalog=catalog, user=request.user, data=data,
                                            note=data.pop("note", ""))
        return Response(CatalogItemSerializer(item).data, status=status.HTTP_201_CREATED)

    def do_update(self, *, instance: CatalogItem, data: dict[str, Any]) -> CatalogItem:
        note = data.pop("note", "")
        data.pop("version", None)
        return services.catalog_item_update(item=instance, user=self.request.user, data=data, note=note)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().update(request, *args, **kwargs)
        response.status_code = status.HTTP_201_CREATED  # a new version (and item row) was created
        return response

    def do_delete(self, *, instance: CatalogItem) -> None:
        services.catalog_item_delete(item=instance, user=self.request.user)


# --- fleets, workloads, scenarios ----------------------------------------------------------------------
class FleetViewSet(ServiceModelViewSet):
    queryset = Fleet.objects.select_related("team").order_by("name", "id")
    serializer_class = FleetSerializer
    filterset_class = FleetFilterSet
    selector = staticmethod(selectors.fleet_list)  # reads go through the app's selector
    search_fields = ("name", "site", "notes")
    ordering_fields = ("name", "site", "server_count", "in_service_date", "created_at", "updated_at")

    def do_create(self, *, team: Any, data: dict[str, Any]) -> Fleet:
        return services.fleet_create(team=team, user=self.request.user, **data)

    def do_update(self, *, instance: Fleet, data: dict[str, Any]) -> Fleet:
        return services.fleet_update(fleet=instance, user=self.request.user, **data)

    def do_delete(self, *, instance: Fleet) -> None:
        services.fleet_delete(fleet=instance, user=self.request.user)

    @extend_schema(request={"multipart/form-data": CsvImportSerializer}, responses={201: FleetSerializer(many=True)})
    @action(detail=False, methods=["post"], url_path="import", parser_classes=[MultiPartParser, FormParser])
    def import_fleets(self, request: Request) -> Response:
        """Create fleets from CSV (header = fleet field names). All or nothing, errors per line."""
        ser = CsvImportSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        fleets = services.fleets_import(team=self.get_target_team(), user=request.user,
                                        file=ser.validated_data["file"])
        return Response(FleetSerializer(fleets, many=True).data, status=status.HTTP_201_CREATED)


class WorkloadViewSet(ServiceModelViewSet):
    queryset = Workload.objects.select_related("team").order_by("name", "id")
    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilterSet
    selector = staticmethod(selectors.workload_list)  # reads go through the app's selector
    search_fields = ("name", "description")
    ordering_fields = ("name", "created_at", "updated_at")
    parser_classes = (JSONParser,)

    def do_create(self, *, team: Any, data: dict[str, Any]) -> Workload:
        return services.workload_create(team=team, user=self.request.user, **data)

    def do_update(self, *, instance: Workload, data: dict[str, Any]) -> Workload:
        return services.workload_update(workload=instance, user=self.request.user, **data)

    def do_delete(self, *, instance: Workload) -> None:
        services.workload_delete(workload=instance, user=self.request.user)


class ScenarioViewSet(ServiceModelViewSet):
    """Scenarios and their resolved engine ``document`` (``run`` / ``sweep`` are added by the simulations API)."""

    queryset = Scenario.objects.select_related("team", "fleet", "workload", "catalog", "pinned_version").order_by(
        "name", "id")
    serializer_class = ScenarioSerializer
    filterset_class = ScenarioFilterSet
    selector = staticmethod(selectors.scenario_list)  # reads go through the app's selector
    search_fields = ("name", "description")
    ordering_fields = ("name", "created_at", "updated_at", "last_evaluated_at")
    action_capabilities = {"document": Capability.READ}
    parser_classes = (JSONParser,)

    def do_create(self, *, team: Any, data: dict[str, Any]) -> Scenario:
        return services.scenario_create(team=team, user=self.request.user, **data)

    def do_update(self, *, instance: Scenario, data: dict[str, Any]) -> Scenario:
        return services.scenario_update(scenario=instance, user=self.request.user, **data)

    def do_delete(self, *, instance: Scenario) -> None:
        services.scenario_delete(scenario=instance, user=self.request.user)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def document(self, request: Request, pk: Any = None) -> Response:
        """The fully resolved engine document and the catalog version it would use."""
        scenario = self.get_object()
        doc, version, _ = services.scenario_resolve(scenario=scenario)
        return Response({"document": doc, "catalog_version": version.pk if version else None,
                         "catalog_version_number": version.number if version else None})


# --- change history ------------------------------------------------------------------------------------
class ObjectChangeViewSet(viewsets.ReadOnlyModelViewSet):
    """Who changed what, when, with before/after and the changed keys.

    ``?object_type=scenario&object_id=12`` gives one object's history.
    """

    serializer_class = ObjectChangeSerializer
    filterset_class = ObjectChangeFilterSet
    ordering_fields = ("time",)

    def get_queryset(self) -> QuerySet[ObjectChange]:
        return change_list(self.request).order_by("-time", "-id")

    @extend_schema(parameters=[OpenApiParameter("object_type", str), OpenApiParameter("object_id", int)])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)
