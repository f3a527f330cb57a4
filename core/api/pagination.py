from rest_framework.pagination import PageNumberPagination as _Base


class PageNumberPagination(_Base):
    """Page-number pagination: ``?page=N&page_size=M`` (max 200)."""

    page_size_query_param = "page_size"
    max_page_size = 200
