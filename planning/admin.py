from django.contrib import admin

from planning.models import (
    Catalog,
    CatalogItem,
    CatalogVersion,
    Fleet,
    ObjectChange,
    Scenario,
    Workload,
)


class CatalogItemInline(admin.TabularInline):
    model = CatalogItem
    extra = 0
    can_delete = False
    readonly_fields = ("key", "kind", "name", "unit_price_usd", "power_w", "specs", "source")


@admin.register(Catalog)
class CatalogAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "forked_from", "updated_at")
    list_filter = ("team",)
    search_fields = ("name",)


@admin.register(CatalogVersion)
class CatalogVersionAdmin(admin.ModelAdmin):
    list_display = ("catalog", "number", "effective_date", "note", "created_by", "created_at")
    list_filter = ("catalog",)
    inlines = (CatalogItemInline,)
    readonly_fields = ("catalog", "number", "created_by", "created_at")


@admin.register(Fleet)
class FleetAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "site", "server_model", "server_count", "fabric", "nic_gbps")
    list_filter = ("team", "fabric", "topology")
    search_fields = ("name", "site")


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "updated_at")
    list_filter = ("team",)


@admin.register(Scenario)
class ScenarioAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "fleet", "workload", "catalog", "pinned_version", "watched", "last_evaluated_at")
    list_filter = ("team", "watched")
    search_fields = ("name",)


@admin.register(ObjectChange)
class ObjectChangeAdmin(admin.ModelAdmin):
    list_display = ("time", "user_name", "action", "object_type", "object_id", "object_repr", "request_id")
    list_filter = ("object_type", "action")
    readonly_fields = [f.name for f in ObjectChange._meta.fields]
